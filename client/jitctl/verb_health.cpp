// `jitctl health`: asks grpc.health.v1.Health/Check whether the daemon is
// ready, with a short deadline, for probes (systemd, Docker HEALTHCHECK,
// Kubernetes exec probes) and scripts. Prints the serving status; exits 0
// only for SERVING.
#include <google/protobuf/struct.pb.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <charconv>
#include <iostream>
#include <optional>

#include "grpc/health/v1/health.grpc.pb.h"
#include "jitd/base/files.h"
#include "jitd/base/status.h"
#include "jitd/base/text.h"
#include "json_output.h"
#include "src/grpc_status.h"
#include "verb.h"

namespace jitd::jitctl {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// Short: a probe wants an answer, not a wait. A local daemon answers in
// well under a millisecond, so 2 s only ever expires on a daemon that is
// wedged or a host that is overloaded, which is what a probe should report.
constexpr char kDefaultTimeout[] = "2s";

// "500ms", or what ParseDuration takes ("2s", "1m", "3").
absl::StatusOr<std::chrono::milliseconds> ParseTimeout(const std::string& text) {
  std::chrono::milliseconds timeout{0};
  if (text.size() > 2 && text.ends_with("ms")) {
    int64_t count = 0;
    const char* end = text.data() + text.size() - 2;
    auto [stop, error] = std::from_chars(text.data(), end, count);
    if (error != std::errc() || stop != end) {
      return absl::InvalidArgumentError(text::Cat("'", text, "' is not a duration (examples: 500ms, 2s, 1m)"));
    }
    timeout = std::chrono::milliseconds(count);
  } else {
    JITD_ASSIGN_OR_RETURN(std::chrono::seconds seconds, ParseDuration(text));
    timeout = seconds;
  }
  if (timeout.count() <= 0) return absl::InvalidArgumentError(text::Cat("'", text, "': must be more than 0"));
  return timeout;
}

std::string OptionValue(const CLI::App& app, const std::string& name) {
  const CLI::Option* option = app.get_option_no_throw(name);
  if (option == nullptr || option->count() == 0) return "";
  return option->as<std::string>();
}

// The credentials jitctl's other verbs use (jitd::Client's rule): TLS for a
// HOST:PORT endpoint when any of --tls-ca, --tls-cert, --tls-key is given,
// plaintext otherwise and always for unix: endpoints.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(const CLI::App& app,
                                                                      const std::string& endpoint) {
  const std::string ca = OptionValue(app, "--tls-ca");
  const std::string cert = OptionValue(app, "--tls-cert");
  const std::string key = OptionValue(app, "--tls-key");
  if (endpoint.starts_with("unix:") || (ca.empty() && cert.empty() && key.empty())) {
    return grpc::InsecureChannelCredentials();
  }
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("a client certificate and its key go together: set both or neither");
  }
  grpc::SslCredentialsOptions ssl;
  for (auto [path, field, what] :
       {std::tuple{&ca, &ssl.pem_root_certs, "TLS CA"}, std::tuple{&cert, &ssl.pem_cert_chain, "TLS certificate"},
        std::tuple{&key, &ssl.pem_private_key, "TLS key"}}) {
    if (path->empty()) continue;
    JITD_ASSIGN_OR_RETURN(std::string pem, files::ReadPemFile(*path, what));
    *field = std::move(pem);
  }
  return grpc::SslCredentials(ssl);
}

std::string Quoted(const std::string& service) {
  return service.empty() ? "\"\" (the server)" : text::Cat("'", service, "'");
}

class HealthVerb final : public Verb {
 public:
  CLI::App* Register(CLI::App& app) override {
    app_ = &app;
    CLI::App* sub = app.add_subcommand("health", "Ask whether the daemon is ready (grpc.health.v1.Health/Check)");
    sub->add_option("--service", service_,
                    "Service to ask about: jitd.v1.Compiler, jitd.v1.CacheAdmin (default: \"\", the server as a "
                    "whole)")
        ->type_name("NAME");
    timeout_option_ = sub->add_option("--timeout", timeout_text_,
                                      "Deadline of the check: 500ms, 2s, 1m (default: the global --timeout when "
                                      "given, else 2s)")
                          ->type_name("DURATION");
    sub->footer(
        "Prints SERVING, NOT_SERVING (the daemon is draining), SERVICE_UNKNOWN or UNKNOWN, and exits 0 only\n"
        "for SERVING: 1 otherwise, or when the daemon cannot be reached (the message names the endpoint).\n"
        "For probes, e.g.: jitctl --endpoint unix:/run/jitd/jitd.sock health");
    return sub;
  }

  absl::Status Validate() override {
    std::string text = kDefaultTimeout;
    if (timeout_option_->count() > 0) {
      text = timeout_text_;
    } else if (std::string global = OptionValue(*app_, "--timeout"); !global.empty()) {
      text = global;
    }
    absl::StatusOr<std::chrono::milliseconds> timeout = ParseTimeout(text);
    if (!timeout.ok()) return absl::InvalidArgumentError(text::Cat("--timeout: ", timeout.status().message()));
    timeout_ = *timeout;
    return absl::OkStatus();
  }

  absl::StatusOr<int> Run(Client& client, const Output& output) override {
    const std::string& endpoint = client.endpoint();
    JITD_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials, Credentials(*app_, endpoint));
    std::unique_ptr<Health::Stub> stub = Health::NewStub(grpc::CreateChannel(endpoint, credentials));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout_);
    HealthCheckRequest request;
    request.set_service(service_);
    HealthCheckResponse response;
    const grpc::Status status = stub->Check(&context, request, &response);
    // A daemon that refuses this user's connection (a bound) says why.
    if (std::optional<absl::Status> refused = client_detail::RefusedBy(status, endpoint)) return *std::move(refused);

    HealthCheckResponse::ServingStatus serving = response.status();
    std::string problem;
    switch (status.error_code()) {
      case grpc::StatusCode::OK:
        break;
      case grpc::StatusCode::NOT_FOUND:  // the standard answer for a service the server does not have
        serving = HealthCheckResponse::SERVICE_UNKNOWN;
        problem = text::Cat("jitd at ", endpoint, " has no service ", Quoted(service_), ": ", status.error_message());
        break;
      case grpc::StatusCode::UNAVAILABLE:
        return absl::UnavailableError(text::Cat("cannot reach jitd at ", endpoint, ": ", status.error_message()));
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        return absl::DeadlineExceededError(
            text::Cat("jitd at ", endpoint, " did not answer Health/Check within ", timeout_.count(), " ms"));
      case grpc::StatusCode::UNIMPLEMENTED:
        return absl::UnimplementedError(
            text::Cat("the server at ", endpoint, " does not serve grpc.health.v1.Health: is it jitd?"));
      default:
        return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                            text::Cat("jitd at ", endpoint, ": ", status.error_message()));
    }
    const std::string name = HealthCheckResponse::ServingStatus_Name(serving);
    if (serving != HealthCheckResponse::SERVING && problem.empty()) {
      problem =
          text::Cat("jitd at ", endpoint, " answers ", name, " for ", Quoted(service_),
                    serving == HealthCheckResponse::NOT_SERVING ? " (it is shutting down, draining its calls)" : "");
    }

    if (output.json) {
      google::protobuf::Struct document;
      auto& fields = *document.mutable_fields();
      fields["endpoint"].set_string_value(endpoint);
      fields["service"].set_string_value(service_);
      fields["status"].set_string_value(name);
      output.out << ToJson(document);
    } else {
      output.out << name << '\n';
    }
    if (problem.empty()) return 0;
    output.out.flush();
    std::cerr << "jitctl: health: " << problem << '\n';
    return 1;
  }

 private:
  CLI::App* app_ = nullptr;
  CLI::Option* timeout_option_ = nullptr;
  std::string service_;
  std::string timeout_text_;
  std::chrono::milliseconds timeout_{0};
};

}  // namespace

std::unique_ptr<Verb> MakeHealthVerb() { return std::make_unique<HealthVerb>(); }

}  // namespace jitd::jitctl
