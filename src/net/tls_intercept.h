// TLS for intercepted connections: a session's own certificate authority, and one end of a TLS
// connection driven over memory, so the egress proxy can speak TLS to the guest (as the host the
// guest asked for, with a certificate this CA minted) and to the real server (verifying it against
// the host's trust store) over the byte streams it already carries.
//
// The CA's key never enters a guest; the guest gets only the certificate, to trust. Leaf
// certificates are minted per host name on first use and kept for the CA's lifetime.
#ifndef AIRLOCK_NET_TLS_INTERCEPT_H_
#define AIRLOCK_NET_TLS_INTERCEPT_H_

#include <openssl/ssl.h>

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace airlock::net {

struct SslCtxFree {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;

// A certificate authority of one session (and its forks). Thread-safe.
class SessionCa {
 public:
  // A new P-256 key and a self-signed CA certificate valid from an hour ago for ten years.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<SessionCa>> Create(absl::string_view label);
  // One stored before (KeyPem() and CertificatePem() of an earlier Create).
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<SessionCa>> Load(absl::string_view key_pem,
                                                                       absl::string_view cert_pem);
  ~SessionCa();

  const std::string& CertificatePem() const { return cert_pem_; }
  // The private key, PEM. Store it only where the host keeps secrets (0600, never in a guest).
  std::string KeyPem() const;

  // A server context presenting a certificate for `host` (minted on first use, then cached),
  // offering only http/1.1 by ALPN.
  [[nodiscard]] absl::StatusOr<SSL_CTX*> ServerContext(const std::string& host);

 private:
  SessionCa(EVP_PKEY* key, X509* cert, std::string cert_pem);

  EVP_PKEY* key_;
  X509* cert_;
  const std::string cert_pem_;
  absl::Mutex mu_;
  std::map<std::string, SslCtxPtr> leaves_ ABSL_GUARDED_BY(mu_);
  EVP_PKEY* leaf_key_ ABSL_GUARDED_BY(mu_) = nullptr;  // one key for every leaf
};

// The client context the proxy verifies real servers with: the system's trust store, plus the
// certificates in extra_ca_file (an operator's private CA; may be empty). Offers http/1.1 only.
[[nodiscard]] absl::StatusOr<SslCtxPtr> UpstreamContext(const std::string& extra_ca_file);

// One end of a TLS connection over memory. The caller moves ciphertext between this and the
// peer; plaintext goes in and out here. Not thread-safe.
class TlsEnd {
 public:
  // The guest's side: we are the server it asked for.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TlsEnd>> Server(SSL_CTX* ctx);
  // The real server's side: we are a client that sends SNI `host` and verifies the certificate
  // names it.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TlsEnd>> Client(SSL_CTX* ctx,
                                                                      const std::string& host);
  ~TlsEnd();
  TlsEnd(const TlsEnd&) = delete;
  TlsEnd& operator=(const TlsEnd&) = delete;

  // Starts a client's handshake: appends its first flight to *wire.
  [[nodiscard]] absl::Status Start(std::string* wire);
  // Ciphertext from the peer. Appends the plaintext it carried to *plain and what must go back to
  // the peer (handshake, alerts) to *wire. An error: the handshake failed (verification, names,
  // protocol); the message says why. *closed is set when the peer sent close_notify.
  [[nodiscard]] absl::Status Receive(absl::string_view cipher, std::string* plain,
                                     std::string* wire, bool* closed);
  // Plaintext for the peer; held until the handshake is done. Appends ciphertext to *wire.
  [[nodiscard]] absl::Status Send(absl::string_view plain, std::string* wire);
  // Appends a close_notify to *wire (once the handshake is done and what was held is sent).
  void Close(std::string* wire);

  bool handshake_done() const { return done_; }

 private:
  explicit TlsEnd(SSL* ssl);
  absl::Status Pump(std::string* plain, std::string* wire, bool* closed);
  void Drain(std::string* wire);
  absl::Status Failure(int ret, absl::string_view when);

  SSL* ssl_;
  BIO* in_;   // ciphertext from the peer (owned by ssl_)
  BIO* out_;  // ciphertext for the peer (owned by ssl_)
  bool done_ = false;
  bool close_asked_ = false;
  std::string pending_;  // plaintext sent before the handshake finished
};

}  // namespace airlock::net

#endif  // AIRLOCK_NET_TLS_INTERCEPT_H_
