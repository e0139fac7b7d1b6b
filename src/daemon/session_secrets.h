// The secret side of sessions: values, held in airlockd's memory only (locked against swap,
// wiped when dropped); each session's certificate authority, kept beside the session (0600)
// so that a paused session resumes with the CA its guest trusts; and what a session's egress
// proxy and commands get from them. Thread-safe.
#ifndef AIRLOCK_DAEMON_SESSION_SECRETS_H_
#define AIRLOCK_DAEMON_SESSION_SECRETS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "src/daemon/records.h"
#include "src/net/egress_proxy.h"
#include "src/net/tls_intercept.h"
#include "src/secrets/secret_source.h"
#include "src/secrets/shared_sources.h"
#include "src/vm/guest_channel.h"

namespace airlock {

// A secret as a client asks for it.
struct SecretRequest {
  std::string spec;   // NAME=SOURCE@HOST[,HOST...][?body&header=NAME] (see secret_spec.h)
  std::string value;  // the value the client read; shared: sources: empty
};

// Where the guest finds the session's CA; commands get these in their environment.
inline constexpr char kGuestCaFile[] = "/etc/airlock/ca.pem";
inline constexpr char kGuestCaBundle[] = "/etc/airlock/ca-bundle.pem";

class SessionSecrets {
 public:
  // op: resolves the op:// references of shared sources (nullptr: they fail). upstream_tls:
  // how real servers are verified.
  SessionSecrets(std::unique_ptr<secrets::SecretSource> op, std::shared_ptr<SSL_CTX> upstream_tls);
  ~SessionSecrets();

  // The sources the operator shares with tenants (airlockd --shared-secrets); set before
  // sessions start. Only these are read by airlockd, with its own rights.
  void set_shared(secrets::SharedSources shared) { shared_ = std::move(shared); }

  // The grants of session `id` of `tenant` after binding `requests` to it (whose grants are
  // `current`): each spec parsed, its value taken from the request (the client read it with its
  // user's rights) or, for a shared: source `tenant` may use, read by airlockd; each value
  // checked; a name already bound keeps its placeholder. Nothing changes if one fails. The
  // values are held for `id` once this returns.
  [[nodiscard]] absl::StatusOr<std::vector<SecretGrant>> Bind(
      const std::string& id, const std::string& tenant, const std::vector<SecretRequest>& requests,
      const std::vector<SecretGrant>& current);
  // The grants without `names` (NOT_FOUND naming one that is not bound); their values go.
  [[nodiscard]] absl::StatusOr<std::vector<SecretGrant>> Unbind(
      const std::string& id, const std::vector<std::string>& names,
      const std::vector<SecretGrant>& current);
  // At resume: reads shared sources again (a rotated secret keeps its placeholder). A source
  // that fails, or is no longer shared with `tenant`, leaves the secret without a value, and
  // says so.
  [[nodiscard]] absl::Status Refresh(const std::string& id, const std::string& tenant,
                                     const std::vector<SecretGrant>& grants);
  void CopyValues(const std::string& from, const std::string& to);
  void Forget(const std::string& id);
  bool Available(const std::string& id, const std::string& name) const;

  // What the egress proxy swaps in: every grant, with its value where one is held.
  std::vector<net::ProxySecret> ForProxy(const std::string& id,
                                         const std::vector<SecretGrant>& grants) const;
  std::shared_ptr<SSL_CTX> upstream_tls() const { return upstream_tls_; }

  // The session's CA, read from dir (ca.key, ca.pem), or made and written there the first time.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<net::SessionCa>> Ca(const std::string& dir,
                                                                   const std::string& id);
  // A fork's guest trusts its parent's CA: the fork gets the same.
  [[nodiscard]] static absl::Status CopyCa(const std::string& from_dir, const std::string& to_dir);

  // The operator's CA certificates (PEM) that every guest trusts besides its image's own
  // (`airlockd --guest-ca`: networks that inspect TLS); empty: none.
  void set_guest_ca(std::string pem) { guest_ca_ = std::move(pem); }
  // More of them for one tenant's guests only (`airlockd --guest-ca-for TENANT=FILE`).
  void set_tenant_guest_ca(const std::string& tenant, std::string pem) {
    tenant_guest_ca_[tenant] = std::move(pem);
  }
  // What the guests of `tenant` trust of the operator's: every guest's and the tenant's own.
  std::string GuestCaFor(const std::string& tenant) const;

  // What each command of a session of `tenant` with these grants gets in its environment:
  // NAME=placeholder for each, and (with grants or a guest CA) the variables that point TLS
  // clients at the bundle that holds the CAs.
  std::vector<std::string> GuestEnv(const std::string& tenant,
                                    const std::vector<SecretGrant>& grants) const;
  // Makes the guest of a session of `tenant` trust the operator's guest CAs for it and the
  // session's CA (either may be absent): both in kGuestCaFile, and the system bundle with them
  // appended at kGuestCaBundle and in place of /etc/ssl/certs/ca-certificates.crt. Nothing to
  // do without either.
  [[nodiscard]] absl::Status InstallTrust(const std::string& tenant, GuestChannel& channel,
                                          const net::SessionCa* session_ca) const;

 private:
  void Hold(const std::string& id, const std::string& name, std::string value);
  void Drop(const std::string& id, const std::vector<std::string>& names);
  // The value of a shared: binding of `tenant`. What went wrong goes to airlockd's log; the
  // tenant hears only that it failed (the words could name the operator's vaults and items).
  absl::StatusOr<std::string> ReadShared(const secrets::SecretSpec& spec,
                                         const std::string& tenant);

  std::unique_ptr<secrets::SecretSource> op_;
  secrets::SharedSources shared_;
  std::shared_ptr<SSL_CTX> upstream_tls_;
  std::string guest_ca_;  // set before sessions start, as are those of tenants
  std::map<std::string, std::string> tenant_guest_ca_;
  mutable absl::Mutex mu_;
  // Session id -> name -> value.
  std::map<std::string, std::map<std::string, std::string>> values_ ABSL_GUARDED_BY(mu_);
};

// As airlockd runs it: `op` from its PATH with its HOME and OP_* variables, servers verified
// against the host's trust store plus the PEM certificates in upstream_ca_file (may be empty;
// an operator's private CA, or a test's), guests trusting the certificates in guest_ca_file
// (may be empty; see ReadGuestCa), those of tenant_guest_ca_files (tenant -> file) too for
// that tenant's guests, and the sources shared_file shares with tenants (may be empty: none;
// see shared_sources.h).
[[nodiscard]] absl::StatusOr<std::unique_ptr<SessionSecrets>> MakeSessionSecrets(
    const std::string& upstream_ca_file, const std::string& guest_ca_file = "",
    const std::string& shared_file = "",
    const std::map<std::string, std::string>& tenant_guest_ca_files = {});

// The certificates of a PEM file for guests to trust, written out again as PEM (so that
// nothing else of the file reaches a guest). An error names the file and what to fix: no
// certificate in it, one that does not parse, or a private key (which must never reach guests).
[[nodiscard]] absl::StatusOr<std::string> ReadGuestCa(const std::string& path);

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_SESSION_SECRETS_H_
