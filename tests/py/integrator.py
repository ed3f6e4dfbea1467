"""An integrator's first calls to a boxfleet node, through a generic gRPC client: Python's
grpcio with the server's reflection (v1alpha, as grpcio-reflection's client asks), no
generated code of ours. Prints one line per check; exits non-zero at the first that fails.

usage: integrator.py ADDR TOKEN
"""

import sys

import grpc
from google.protobuf import descriptor_pool, json_format
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)


def main(addr: str, token: str) -> None:
    channel = grpc.insecure_channel(addr)
    database = ProtoReflectionDescriptorDatabase(channel)
    services = set(database.get_services())
    for wanted in ("boxfleet.v1.Runs", "boxfleet.v1.Ops", "grpc.health.v1.Health"):
        assert wanted in services, f"reflection lists {sorted(services)}, not {wanted}"
    print("reflection v1alpha lists", ", ".join(sorted(services)))

    health = health_pb2_grpc.HealthStub(channel)
    served = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
    assert served.status == health_pb2.HealthCheckResponse.SERVING, served
    print("health: SERVING")

    pool = descriptor_pool.DescriptorPool(database)
    runs = pool.FindServiceByName("boxfleet.v1.Runs")
    metadata = (("authorization", f"Bearer {token}"),)

    def call(method_name: str, request: dict):
        method = runs.methods_by_name[method_name]
        request_type = GetMessageClass(method.input_type)
        reply_type = GetMessageClass(method.output_type)
        stub = channel.unary_unary(
            f"/boxfleet.v1.Runs/{method_name}",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=reply_type.FromString,
        )
        message = json_format.ParseDict(request, request_type())
        return stub(message, metadata=metadata, timeout=30)

    def refused(method_name: str, request: dict, code, names: str) -> None:
        try:
            call(method_name, request)
        except grpc.RpcError as error:
            assert error.code() == code, f"{method_name}: {error.code()} {error.details()}"
            assert names in error.details(), f"{method_name}: {error.details()!r} names no {names}"
            print(f"{method_name} {request}: {error.code().name}: {error.details()}")
            return
        raise AssertionError(f"{method_name} {request} was answered OK")

    refused("Get", {"turnId": "turn-never-launched"}, grpc.StatusCode.NOT_FOUND, "turn_id")
    refused("Get", {}, grpc.StatusCode.INVALID_ARGUMENT, "turn_id")
    refused("Tail", {"turnId": "turn-never-launched"}, grpc.StatusCode.NOT_FOUND, "turn_id")
    refused("Launch", {}, grpc.StatusCode.INVALID_ARGUMENT, "seat")
    # a launch the node cannot run is a domain refusal, in the reply (DESIGN §8), naming the
    # proto field
    no_command = call("Launch", {"seat": "py", "runner": "command"})
    assert no_command.WhichOneof("outcome") == "refused", no_command
    assert "LaunchRequest.command" in no_command.refused.reason, no_command
    print("Launch without a command: refused:", no_command.refused.reason)

    launched = call("Launch", {"seat": "py", "command": "echo from-python", "runner": "command"})
    outcome = launched.WhichOneof("outcome")
    assert outcome == "launched", launched
    turn = launched.launched.turn_id
    print("Launch: launched", turn)
    got = call("Get", {"turnId": turn})
    assert got.found, got
    print("Get: found", turn)

    try:
        call("Get", {"turnId": "x" * 4096})
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
        print("Get of an oversized id: INVALID_ARGUMENT")

    unauthenticated = grpc.insecure_channel(addr).unary_unary(
        "/boxfleet.v1.Runs/Board",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=lambda b: b,
    )
    board_request = GetMessageClass(runs.methods_by_name["Board"].input_type)()
    try:
        unauthenticated(board_request, timeout=10)
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error
        print("Board without a credential: UNAUTHENTICATED")
    else:
        raise AssertionError("Board without a credential was answered")
    # an outcome is an enum, as Tail's is
    answer_kind = runs.methods_by_name["Answer"].output_type.enum_types_by_name["Kind"]
    try:
        answered = call("Answer", {"turnId": "turn-never-launched", "text": "yes"})
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.NOT_FOUND, error
        print("Answer of an unknown turn: NOT_FOUND")
    else:
        kind = answer_kind.values_by_number[answered.kind].name
        assert kind == "KIND_GONE" and answered.outcome == "gone", answered
        print("Answer of an unknown turn:", kind)
    print("integrator: all checks passed")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
