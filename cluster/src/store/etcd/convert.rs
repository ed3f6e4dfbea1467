//! Our store's types to etcd-client's and back.

use etcd_client as etcd;

use crate::store::{Compare, CompareOp, KeyValue, Op, OpResult, Target, Txn, TxnResponse};

pub(super) fn key_value(kv: &etcd::KeyValue) -> KeyValue {
    KeyValue {
        key: String::from_utf8_lossy(kv.key()).into_owned(),
        value: kv.value().to_vec(),
        create_revision: kv.create_revision(),
        mod_revision: kv.mod_revision(),
        version: kv.version(),
        lease: kv.lease(),
    }
}

fn compare(compare: Compare) -> etcd::Compare {
    let op = match compare.op {
        CompareOp::Equal => etcd::CompareOp::Equal,
        CompareOp::NotEqual => etcd::CompareOp::NotEqual,
        CompareOp::Greater => etcd::CompareOp::Greater,
        CompareOp::Less => etcd::CompareOp::Less,
    };
    match compare.target {
        Target::ModRevision(revision) => etcd::Compare::mod_revision(compare.key, op, revision),
        Target::CreateRevision(revision) => {
            etcd::Compare::create_revision(compare.key, op, revision)
        }
        Target::Version(version) => etcd::Compare::version(compare.key, op, version),
        Target::Value(value) => etcd::Compare::value(compare.key, op, value),
    }
}

fn txn_op(op: Op) -> etcd::TxnOp {
    match op {
        Op::Put { key, value, lease } => {
            let options = (lease != 0).then(|| etcd::PutOptions::new().with_lease(lease));
            etcd::TxnOp::put(key, value, options)
        }
        Op::Delete { key } => etcd::TxnOp::delete(key, None),
        Op::DeletePrefix { prefix } => {
            etcd::TxnOp::delete(prefix, Some(etcd::DeleteOptions::new().with_prefix()))
        }
        Op::Get { key } => etcd::TxnOp::get(key, None),
    }
}

/// The etcd txn for ours.
pub(super) fn txn(txn: Txn) -> etcd::Txn {
    etcd::Txn::new()
        .when(txn.compares.into_iter().map(compare).collect::<Vec<_>>())
        .and_then(txn.success.into_iter().map(txn_op).collect::<Vec<_>>())
        .or_else(txn.failure.into_iter().map(txn_op).collect::<Vec<_>>())
}

/// Our txn response for etcd's.
pub(super) fn txn_response(response: &etcd::TxnResponse) -> TxnResponse {
    let results = response
        .op_responses()
        .into_iter()
        .map(|op| match op {
            etcd::TxnOpResponse::Put(_) => OpResult::Put,
            etcd::TxnOpResponse::Delete(delete) => OpResult::Delete(delete.deleted()),
            etcd::TxnOpResponse::Get(get) => OpResult::Get(get.kvs().first().map(key_value)),
            etcd::TxnOpResponse::Txn(_) => OpResult::Put,
        })
        .collect();
    TxnResponse {
        succeeded: response.succeeded(),
        revision: response.header().map_or(0, |header| header.revision()),
        results,
    }
}
