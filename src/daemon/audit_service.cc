// The Audit service: the host's audit log and its hash chain, for root over the socket and the
// read-only operators (operators.h).
#include "absl/strings/str_cat.h"
#include "src/daemon/airlock_service.h"

namespace airlock {
namespace {

constexpr uint32_t kDefaultAuditRecords = 1000;
constexpr uint32_t kMaxAuditRecords = 100000;

}  // namespace

grpc::Status AuditService::Authorize(grpc::ServerContext* context, const char* what) const {
  absl::StatusOr<Principal> who = airlock::Authorize(context, peers_, Access::kRead);
  if (!who.ok()) return ToGrpc(who.status());
  if (!who->SeesEveryTenant()) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("only root and read-only operators may ", what,
                                     " the audit log (it holds every user's records); your "
                                     "own sessions' records are in airlock log ID"));
  }
  return grpc::Status::OK;
}

grpc::Status AuditService::List(grpc::ServerContext* context, const v1::ListAuditRequest* request,
                                grpc::ServerWriter<v1::AuditRecord>* writer) {
  if (grpc::Status s = Authorize(context, "read"); !s.ok()) return s;
  if (request->limit() > kMaxAuditRecords) {
    return ToGrpc(absl::InvalidArgumentError(
        absl::StrCat("at most ", kMaxAuditRecords, " records at once; ask for fewer")));
  }
  uint32_t limit = request->limit() == 0 ? kDefaultAuditRecords : request->limit();
  absl::StatusOr<std::vector<AuditRecord>> records =
      store_->audit().Since(request->since_unix_ms(), limit);
  if (!records.ok()) return ToGrpc(records.status());
  for (const AuditRecord& r : *records) {
    v1::AuditRecord out;
    out.set_seq(r.seq);
    out.set_unix_ms(r.unix_ms);
    out.set_principal(r.principal);
    out.set_tenant(r.tenant);
    out.set_action(r.action);
    out.set_target(r.target);
    out.set_outcome(r.outcome);
    out.set_hash(r.hash);
    if (context->IsCancelled() || !writer->Write(out)) break;
  }
  return grpc::Status::OK;
}

grpc::Status AuditService::Verify(grpc::ServerContext* context,
                                  const v1::VerifyAuditRequest* /*request*/,
                                  v1::AuditVerification* response) {
  if (grpc::Status s = Authorize(context, "verify"); !s.ok()) return s;
  absl::StatusOr<AuditCheck> check = store_->audit().Verify();
  if (!check.ok()) return ToGrpc(check.status());
  response->set_ok(check->ok);
  response->set_records(check->records);
  response->set_last_seq(check->last_seq);
  response->set_problem(check->problem);
  response->set_first_bad_seq(check->first_bad_seq);
  return grpc::Status::OK;
}

}  // namespace airlock
