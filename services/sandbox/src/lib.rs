//! boxfleet's sandbox backends (DESIGN §9): `fake` and `direct`.
