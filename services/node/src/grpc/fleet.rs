//! The Fleet service (DESIGN §8.4): the calls another node forwarded here because this node
//! holds the seat, answered here and never forwarded again; and a remote job's completion the
//! poll duty found for a seat held here.

use boxfleet_proto::v1 as pb;
use tonic::{Request, Response, Status as GrpcStatus};

use std::sync::Arc;

use boxfleet_auth::{Call, Principal};

use super::local::Local;
use crate::fleet_link::collect_here;
use crate::trust::{CALLER_HEADER, Trust, authorize, bearer, denied, principal_of};

/// The Fleet service: calls another node forwarded here, answered here.
#[derive(Debug)]
pub struct FleetService {
    pub local: Local,
    pub trust: Arc<Trust>,
    /// the fleet's nodes call each other over mutual TLS: a Fleet call presents a certificate
    pub mutual_tls: bool,
}

impl FleetService {
    /// A Fleet call comes from another node of this fleet: its credential is a node's (or an
    /// admin's), and with mutual TLS it presented a certificate the fleet's CA signed.
    fn check_peer<T>(&self, request: &Request<T>) -> Result<(), GrpcStatus> {
        let peer = principal_of(request)?;
        authorize(&peer, &Call::Fleet, "")?;
        if self.mutual_tls && request.peer_certs().is_none_or(|certs| certs.is_empty()) {
            return Err(GrpcStatus::permission_denied(
                "permission denied: the Fleet service takes calls from the fleet's nodes, and this one presented no certificate",
            ));
        }
        Ok(())
    }

    /// The caller a forwarding node acts for: its own credential, carried beside the node's.
    fn caller<T>(&self, request: &Request<T>) -> Result<Principal, GrpcStatus> {
        self.check_peer(request)?;
        let token = bearer(request.metadata(), CALLER_HEADER).ok_or_else(|| {
            GrpcStatus::unauthenticated(
                "unauthenticated: a forwarded call carries its caller's credential, and this one carries none",
            )
        })?;
        self.trust.verify(token).map_err(denied)
    }
}

#[tonic::async_trait]
impl pb::fleet_server::Fleet for FleetService {
    async fn ping(
        &self,
        request: Request<pb::PingRequest>,
    ) -> Result<Response<pb::PingReply>, GrpcStatus> {
        self.check_peer(&request)?;
        Ok(Response::new(pb::PingReply {
            node: self.local.coordinator.node.clone(),
            incarnation: self.local.coordinator.incarnation.clone(),
            seats: self.local.coordinator.held_seats().len() as u32,
        }))
    }

    async fn seat_launch(
        &self,
        request: Request<pb::LaunchRequest>,
    ) -> Result<Response<pb::LaunchReply>, GrpcStatus> {
        let caller = self.caller(&request)?;
        self.local.launch_here(&caller, request.into_inner()).await
    }

    async fn seat_deliver(
        &self,
        request: Request<pb::DeliverRequest>,
    ) -> Result<Response<pb::DeliverReply>, GrpcStatus> {
        let caller = self.caller(&request)?;
        self.local.deliver_here(&caller, request.into_inner()).await
    }

    async fn seat_answer(
        &self,
        request: Request<pb::AnswerRequest>,
    ) -> Result<Response<pb::AnswerReply>, GrpcStatus> {
        let caller = self.caller(&request)?;
        self.local.answer_here(&caller, request.into_inner()).await
    }

    async fn owner_tail(
        &self,
        request: Request<pb::TailRequest>,
    ) -> Result<Response<pb::TailReply>, GrpcStatus> {
        let caller = self.caller(&request)?;
        self.local.tail_here(&caller, request.into_inner()).await
    }

    async fn seat_complete(
        &self,
        request: Request<pb::CompleteRequest>,
    ) -> Result<Response<pb::CompleteReply>, GrpcStatus> {
        self.check_peer(&request)?;
        let r = request.into_inner();
        // the claim decides: a completion told twice, or one this node found itself, is
        // collected once
        collect_here(&self.local.coordinator, &r.turn_id, &r.launch_id)
            .map_err(GrpcStatus::unavailable)?;
        Ok(Response::new(pb::CompleteReply {}))
    }
}
