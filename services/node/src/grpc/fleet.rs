//! The Fleet service (DESIGN §8.4): the calls another node forwarded here because this node
//! holds the seat, answered here and never forwarded again; and a remote job's completion the
//! poll duty found for a seat held here.

use boxfleet_proto::v1 as pb;
use tonic::{Request, Response, Status as GrpcStatus};

use super::local::Local;
use crate::fleet_link::collect_here;

/// The Fleet service: calls another node forwarded here, answered here.
#[derive(Debug)]
pub struct FleetService {
    pub local: Local,
}

#[tonic::async_trait]
impl pb::fleet_server::Fleet for FleetService {
    async fn ping(
        &self,
        _request: Request<pb::PingRequest>,
    ) -> Result<Response<pb::PingReply>, GrpcStatus> {
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
        self.local.launch_here(request.into_inner()).await
    }

    async fn seat_deliver(
        &self,
        request: Request<pb::DeliverRequest>,
    ) -> Result<Response<pb::DeliverReply>, GrpcStatus> {
        self.local.deliver_here(request.into_inner()).await
    }

    async fn seat_answer(
        &self,
        request: Request<pb::AnswerRequest>,
    ) -> Result<Response<pb::AnswerReply>, GrpcStatus> {
        self.local.answer_here(request.into_inner()).await
    }

    async fn owner_tail(
        &self,
        request: Request<pb::TailRequest>,
    ) -> Result<Response<pb::TailReply>, GrpcStatus> {
        self.local.tail_here(request.into_inner()).await
    }

    async fn seat_complete(
        &self,
        request: Request<pb::CompleteRequest>,
    ) -> Result<Response<pb::CompleteReply>, GrpcStatus> {
        let r = request.into_inner();
        // the claim decides: a completion told twice, or one this node found itself, is
        // collected once
        collect_here(&self.local.coordinator, &r.turn_id, &r.launch_id)
            .map_err(GrpcStatus::unavailable)?;
        Ok(Response::new(pb::CompleteReply {}))
    }
}
