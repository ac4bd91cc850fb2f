#include "echo_server.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <cstdio>

namespace jitd::bench {
namespace {

class EchoService final : public Echo::Service {
  grpc::Status Get(grpc::ServerContext*, const EchoRequest* request, EchoReply* reply) override {
    // Filled per call, as jitd copies a hot-cache cubin into each response.
    reply->mutable_payload()->assign(request->size(), 'e');
    return grpc::Status::OK;
  }
};

}  // namespace

int RunEchoServer(const std::string& endpoint) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // gRPC's threads inherit the mask

  EchoService service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(endpoint, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::fprintf(stderr, "echo server: cannot listen on %s\n", endpoint.c_str());
    return 1;
  }
  int signal = 0;
  sigwait(&stop, &signal);
  server->Shutdown();
  return 0;
}

std::unique_ptr<Echo::Stub> ConnectEcho(const std::string& endpoint) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  return Echo::NewStub(grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args));
}

}  // namespace jitd::bench
