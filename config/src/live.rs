//! The company a running node works from, swapped whole by a reload ([`LiveCompany`]): every
//! reader takes the current document at once and keeps it for what it is deciding, so no
//! decision mixes two revisions.

use std::sync::{Arc, RwLock};

use crate::company::Company;

/// The node's current company document, shared by every part that reads it.
#[derive(Debug, Clone, Default)]
pub struct LiveCompany(Arc<RwLock<Arc<Company>>>);

impl LiveCompany {
    pub fn new(company: Company) -> Self {
        LiveCompany(Arc::new(RwLock::new(Arc::new(company))))
    }

    /// The document in force now.
    pub fn get(&self) -> Arc<Company> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Puts `company` in force for every reader from the next [`LiveCompany::get`].
    pub fn set(&self, company: Company) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(company);
    }
}
