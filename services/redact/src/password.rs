//! Password values (stub: filled in by the password work).
use crate::Claim;
use crate::lines::Line;

pub(crate) fn find(_text: &str, _lines: &[Line], _tokens: &[Claim], _out: &mut Vec<Claim>) {}

pub(crate) fn hold(_text: &str, _lines: &[Line]) -> Option<usize> {
    None
}
