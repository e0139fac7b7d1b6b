#include "src/net/tls_intercept.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace airlock::net {
namespace {

constexpr long kCaDays = 3650;
constexpr long kLeafDays = 397;

std::string OpenSslError(absl::string_view what) {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return std::string(what);
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return absl::StrCat(what, ": ", text);
}

absl::Status Internal(absl::string_view what) { return absl::InternalError(OpenSslError(what)); }

bool RandomSerial(X509* cert) {
  BIGNUM* bn = BN_new();
  bool ok = bn != nullptr && BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
            BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) != nullptr;
  BN_free(bn);
  return ok;
}

bool AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// The host as a subjectAltName: an IP address entry for an address, else a DNS name. Built as
// ASN.1, not as a config string, so no byte of the name is read as syntax.
bool AddSubjectAltName(X509* cert, const std::string& host) {
  GENERAL_NAMES* names = sk_GENERAL_NAME_new_null();
  GENERAL_NAME* name = GENERAL_NAME_new();
  bool ok = names != nullptr && name != nullptr;
  if (ok) {
    if (ASN1_OCTET_STRING* ip = a2i_IPADDRESS(host.c_str()); ip != nullptr) {
      GENERAL_NAME_set0_value(name, GEN_IPADD, ip);
    } else {
      ASN1_IA5STRING* dns = ASN1_IA5STRING_new();
      ok = dns != nullptr && ASN1_STRING_set(dns, host.data(), static_cast<int>(host.size())) == 1;
      if (ok) {
        GENERAL_NAME_set0_value(name, GEN_DNS, dns);
      } else {
        ASN1_IA5STRING_free(dns);
      }
    }
  }
  if (ok) {
    ok = sk_GENERAL_NAME_push(names, name) > 0;
    if (ok) name = nullptr;
  }
  ok = ok && X509_add1_ext_i2d(cert, NID_subject_alt_name, names, 0, X509V3_ADD_DEFAULT) == 1;
  GENERAL_NAME_free(name);
  GENERAL_NAMES_free(names);
  return ok;
}

// ALPN: http/1.1 when the client offers it; otherwise no protocol is chosen (HTTP/1.1 then).
int SelectHttp11(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                 unsigned int inlen, void*) {
  static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, outlen, kHttp11, sizeof(kHttp11), in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

std::string Pem(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  std::string out;
  if (bio != nullptr && PEM_write_bio_X509(bio, cert) == 1) {
    char* data = nullptr;
    long n = BIO_get_mem_data(bio, &data);
    out.assign(data, static_cast<size_t>(n));
  }
  BIO_free(bio);
  return out;
}

}  // namespace

SessionCa::SessionCa(EVP_PKEY* key, X509* cert, std::string cert_pem)
    : key_(key), cert_(cert), cert_pem_(std::move(cert_pem)) {}

SessionCa::~SessionCa() {
  EVP_PKEY_free(leaf_key_);
  X509_free(cert_);
  EVP_PKEY_free(key_);
}

absl::StatusOr<std::shared_ptr<SessionCa>> SessionCa::Create(absl::string_view label) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (key == nullptr) return Internal("generating the session CA's key");
  X509* cert = X509_new();
  std::string cn = absl::StrCat("Airlock session CA ", label.substr(0, 40));
  X509_NAME* name = cert == nullptr ? nullptr : X509_get_subject_name(cert);
  bool ok = cert != nullptr && X509_set_version(cert, 2) == 1 && RandomSerial(cert) &&
            X509_gmtime_adj(X509_getm_notBefore(cert), -3600) != nullptr &&
            X509_gmtime_adj(X509_getm_notAfter(cert), kCaDays * 86400) != nullptr &&
            X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                                       reinterpret_cast<const unsigned char*>("Airlock"), -1, -1,
                                       0) == 1 &&
            X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                       reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                       0) == 1 &&
            X509_set_issuer_name(cert, name) == 1 && X509_set_pubkey(cert, key) == 1 &&
            AddExtension(cert, cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
            AddExtension(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign") &&
            AddExtension(cert, cert, NID_subject_key_identifier, "hash") &&
            X509_sign(cert, key, EVP_sha256()) > 0;
  if (!ok) {
    absl::Status s = Internal("making the session CA's certificate");
    X509_free(cert);
    EVP_PKEY_free(key);
    return s;
  }
  return std::shared_ptr<SessionCa>(new SessionCa(key, cert, Pem(cert)));
}

absl::StatusOr<std::shared_ptr<SessionCa>> SessionCa::Load(absl::string_view key_pem,
                                                           absl::string_view cert_pem) {
  BIO* kb = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  BIO* cb = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  EVP_PKEY* key = kb == nullptr ? nullptr : PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
  X509* cert = cb == nullptr ? nullptr : PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
  BIO_free(kb);
  BIO_free(cb);
  if (key == nullptr || cert == nullptr || X509_check_private_key(cert, key) != 1) {
    absl::Status s = absl::DataLossError(OpenSslError("the stored session CA does not load"));
    X509_free(cert);
    EVP_PKEY_free(key);
    return s;
  }
  return std::shared_ptr<SessionCa>(new SessionCa(key, cert, Pem(cert)));
}

std::string SessionCa::KeyPem() const {
  BIO* bio = BIO_new(BIO_s_mem());
  std::string out;
  if (bio != nullptr &&
      PEM_write_bio_PrivateKey(bio, key_, nullptr, nullptr, 0, nullptr, nullptr) == 1) {
    char* data = nullptr;
    long n = BIO_get_mem_data(bio, &data);
    out.assign(data, static_cast<size_t>(n));
  }
  BIO_free(bio);
  return out;
}

absl::StatusOr<SSL_CTX*> SessionCa::ServerContext(const std::string& host) {
  absl::MutexLock lock(&mu_);
  if (auto it = leaves_.find(host); it != leaves_.end()) return it->second.get();
  if (leaf_key_ == nullptr) {
    leaf_key_ = EVP_EC_gen("P-256");
    if (leaf_key_ == nullptr) return Internal("generating a leaf key");
  }
  X509* leaf = X509_new();
  X509_NAME* name = leaf == nullptr ? nullptr : X509_get_subject_name(leaf);
  std::string cn = host.substr(0, 64);  // CN is capped at 64; the SAN carries the whole name
  bool ok = leaf != nullptr && X509_set_version(leaf, 2) == 1 && RandomSerial(leaf) &&
            X509_gmtime_adj(X509_getm_notBefore(leaf), -3600) != nullptr &&
            X509_gmtime_adj(X509_getm_notAfter(leaf), kLeafDays * 86400) != nullptr &&
            X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                       reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                       0) == 1 &&
            X509_set_issuer_name(leaf, X509_get_subject_name(cert_)) == 1 &&
            X509_set_pubkey(leaf, leaf_key_) == 1 &&
            AddExtension(leaf, cert_, NID_basic_constraints, "critical,CA:FALSE") &&
            AddExtension(leaf, cert_, NID_key_usage, "critical,digitalSignature") &&
            AddExtension(leaf, cert_, NID_ext_key_usage, "serverAuth") &&
            AddExtension(leaf, cert_, NID_subject_key_identifier, "hash") &&
            AddExtension(leaf, cert_, NID_authority_key_identifier, "keyid:always") &&
            AddSubjectAltName(leaf, host) && X509_sign(leaf, key_, EVP_sha256()) > 0;
  SslCtxPtr ctx(ok ? SSL_CTX_new(TLS_server_method()) : nullptr);
  ok = ctx != nullptr && SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION) == 1 &&
       SSL_CTX_use_certificate(ctx.get(), leaf) == 1 &&
       SSL_CTX_use_PrivateKey(ctx.get(), leaf_key_) == 1;
  X509_free(leaf);
  if (!ok) return Internal(absl::StrCat("minting a certificate for ", host));
  SSL_CTX_set_alpn_select_cb(ctx.get(), SelectHttp11, nullptr);
  SSL_CTX* raw = ctx.get();
  leaves_.emplace(host, std::move(ctx));
  return raw;
}

absl::StatusOr<SslCtxPtr> UpstreamContext(const std::string& extra_ca_file) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (ctx == nullptr || SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION) != 1) {
    return Internal("making the upstream TLS context");
  }
  if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
    return Internal("loading the system's trusted certificates");
  }
  if (!extra_ca_file.empty() &&
      SSL_CTX_load_verify_locations(ctx.get(), extra_ca_file.c_str(), nullptr) != 1) {
    return absl::InvalidArgumentError(OpenSslError(absl::StrCat(
        "reading the upstream CA file ", extra_ca_file, " (give a file of PEM certificates)")));
  }
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_CTX_set_alpn_protos(ctx.get(), kHttp11, sizeof(kHttp11));
  return ctx;
}

TlsEnd::TlsEnd(SSL* ssl) : ssl_(ssl) {}

TlsEnd::~TlsEnd() { SSL_free(ssl_); }

absl::StatusOr<std::unique_ptr<TlsEnd>> TlsEnd::Server(SSL_CTX* ctx) {
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr) return Internal("SSL_new");
  std::unique_ptr<TlsEnd> end(new TlsEnd(ssl));
  end->in_ = BIO_new(BIO_s_mem());
  end->out_ = BIO_new(BIO_s_mem());
  if (end->in_ == nullptr || end->out_ == nullptr) {
    BIO_free(end->in_);
    BIO_free(end->out_);
    return Internal("BIO_new");
  }
  BIO_set_mem_eof_return(end->in_, -1);  // empty means "wait for more", not end of stream
  SSL_set_bio(ssl, end->in_, end->out_);
  SSL_set_accept_state(ssl);
  return end;
}

absl::StatusOr<std::unique_ptr<TlsEnd>> TlsEnd::Client(SSL_CTX* ctx, const std::string& host) {
  absl::StatusOr<std::unique_ptr<TlsEnd>> end = Server(ctx);
  if (!end.ok()) return end.status();
  SSL* ssl = (*end)->ssl_;
  SSL_set_connect_state(ssl);
  bool ok;
  if (ASN1_OCTET_STRING* ip = a2i_IPADDRESS(host.c_str()); ip != nullptr) {
    ASN1_OCTET_STRING_free(ip);
    ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) == 1;
  } else {
    ok = SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 && SSL_set1_host(ssl, host.c_str()) == 1;
  }
  if (!ok) return Internal(absl::StrCat("setting the name to verify, ", host));
  return end;
}

absl::Status TlsEnd::Start(std::string* wire) {
  bool closed = false;
  std::string plain;
  return Pump(&plain, wire, &closed);
}

void TlsEnd::Drain(std::string* wire) {
  char buf[16384];
  int n;
  while ((n = BIO_read(out_, buf, sizeof(buf))) > 0) wire->append(buf, static_cast<size_t>(n));
}

absl::Status TlsEnd::Failure(int ret, absl::string_view when) {
  long verify = SSL_get_verify_result(ssl_);
  if (!SSL_is_server(ssl_) && verify != X509_V_OK) {
    ERR_clear_error();
    return absl::UnavailableError(absl::StrCat("the server's certificate did not verify: ",
                                               X509_verify_cert_error_string(verify)));
  }
  int error = SSL_get_error(ssl_, ret);
  if (error == SSL_ERROR_SSL) return absl::UnavailableError(OpenSslError(when));
  ERR_clear_error();
  return absl::UnavailableError(absl::StrCat(when, " failed (", error, ")"));
}

absl::Status TlsEnd::Pump(std::string* plain, std::string* wire, bool* closed) {
  if (!done_) {
    int r = SSL_do_handshake(ssl_);
    if (r != 1) {
      int error = SSL_get_error(ssl_, r);
      Drain(wire);  // an alert, or the next flight
      if (error == SSL_ERROR_WANT_READ) return absl::OkStatus();
      return Failure(r, "the TLS handshake");
    }
    done_ = true;
    if (!pending_.empty()) {
      std::string held;
      held.swap(pending_);
      if (absl::Status s = Send(held, wire); !s.ok()) return s;
    }
    if (close_asked_) Close(wire);
  }
  char buf[16384];
  for (;;) {
    int n = SSL_read(ssl_, buf, sizeof(buf));
    if (n > 0) {
      plain->append(buf, static_cast<size_t>(n));
      continue;
    }
    int error = SSL_get_error(ssl_, n);
    Drain(wire);
    if (error == SSL_ERROR_WANT_READ) return absl::OkStatus();
    if (error == SSL_ERROR_ZERO_RETURN) {
      *closed = true;
      return absl::OkStatus();
    }
    return Failure(n, "reading TLS");
  }
}

absl::Status TlsEnd::Receive(absl::string_view cipher, std::string* plain, std::string* wire,
                             bool* closed) {
  if (!cipher.empty() && BIO_write(in_, cipher.data(), static_cast<int>(cipher.size())) <= 0) {
    return Internal("BIO_write");
  }
  return Pump(plain, wire, closed);
}

absl::Status TlsEnd::Send(absl::string_view plain, std::string* wire) {
  if (!done_) {
    pending_.append(plain.data(), plain.size());
    return absl::OkStatus();
  }
  while (!plain.empty()) {
    int n =
        SSL_write(ssl_, plain.data(), static_cast<int>(std::min<size_t>(plain.size(), 1 << 20)));
    if (n <= 0) return Failure(n, "writing TLS");
    plain.remove_prefix(static_cast<size_t>(n));
  }
  Drain(wire);
  return absl::OkStatus();
}

void TlsEnd::Close(std::string* wire) {
  close_asked_ = true;
  if (done_) SSL_shutdown(ssl_);
  ERR_clear_error();
  Drain(wire);
}

}  // namespace airlock::net
