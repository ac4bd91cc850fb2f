// The bare gRPC echo server bench_serving measures jitd against.
#pragma once

#include <memory>
#include <string>

#include "echo.grpc.pb.h"

namespace jitd::bench {

// Serves jitd.bench.Echo on `endpoint` ("unix:PATH") until the process gets
// SIGTERM or SIGINT; returns the exit code for main. Call it before any
// other thread starts: it blocks those signals so that only it sees them.
int RunEchoServer(const std::string& endpoint);

// A stub on its own channel, with the channel arguments jitd::Client uses
// (no receive limit), so that both sides of a comparison travel alike.
std::unique_ptr<Echo::Stub> ConnectEcho(const std::string& endpoint);

}  // namespace jitd::bench
