//! Private-key blocks (stub: filled in by the keys work).
use crate::Claim;
use crate::lines::Line;

pub(crate) fn find(_text: &str, _lines: &[Line], _claimed: &[Claim], _out: &mut Vec<Claim>) {}

pub(crate) fn hold(_text: &str, _lines: &[Line]) -> Option<usize> {
    None
}
