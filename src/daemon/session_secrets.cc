#include "src/daemon/session_secrets.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/common/file_util.h"
#include "src/common/log.h"

namespace airlock {
namespace {

constexpr char kCaKeyFile[] = "ca.key";
constexpr char kCaCertFile[] = "ca.pem";
constexpr char kSystemBundle[] = "/etc/ssl/certs/ca-certificates.crt";
constexpr size_t kMaxGuestBundle = 3 << 20;  // a guest's file the host reads: capped

}  // namespace

SessionSecrets::SessionSecrets(std::unique_ptr<secrets::SecretSource> op,
                               std::shared_ptr<SSL_CTX> upstream_tls)
    : op_(std::move(op)), upstream_tls_(std::move(upstream_tls)) {}

SessionSecrets::~SessionSecrets() {
  absl::MutexLock lock(&mu_);
  for (auto& [id, values] : values_) {
    for (auto& [name, value] : values) secrets::Wipe(value);
  }
}

void SessionSecrets::Hold(const std::string& id, const std::string& name, std::string value) {
  // Kept out of swap (best effort: the pages stay locked; they are few).
  if (!value.empty()) mlock(value.data(), value.size());
  absl::MutexLock lock(&mu_);
  std::string& slot = values_[id][name];
  secrets::Wipe(slot);
  slot = std::move(value);
}

absl::StatusOr<std::string> SessionSecrets::ReadShared(const secrets::SecretSpec& spec,
                                                       const std::string& tenant) {
  const secrets::SharedSource* source = shared_.Find(spec.reference(), tenant);
  if (source == nullptr) {
    return absl::NotFoundError(absl::StrCat("secret ", spec.name, ": ", spec.source,
                                            " is no longer shared with you; ask the operator"));
  }
  secrets::SecretSpec read = source->spec;
  read.name = spec.name;
  absl::StatusOr<std::string> value;
  std::string warning;
  if (read.kind() == secrets::SourceKind::kOnePassword) {
    value = op_ != nullptr ? op_->Resolve(read)
                           : absl::FailedPreconditionError("airlockd has no 1Password CLI");
  } else {
    value = secrets::ReadLocalSecret(read, &warning);
  }
  if (value.ok()) {
    if (absl::Status s = secrets::CheckSecretValue(read, *value); !s.ok()) {
      secrets::Wipe(*value);
      value = s;
    }
  }
  if (!value.ok()) {
    LogWarning(absl::StrCat("shared source ", source->name, " for ", tenant, ": ",
                            value.status().message()));
    return absl::UnavailableError(
        absl::StrCat("secret ", spec.name, ": airlockd could not read the shared source ",
                     spec.reference(), "; the operator finds why in airlockd's log"));
  }
  return value;
}

absl::StatusOr<std::vector<SecretGrant>> SessionSecrets::Bind(
    const std::string& id, const std::string& tenant, const std::vector<SecretRequest>& requests,
    const std::vector<SecretGrant>& current) {
  std::vector<SecretGrant> grants = current;
  std::vector<std::pair<std::string, std::string>> staged;  // name, value
  auto wipe_staged = [&] {
    for (auto& [name, value] : staged) secrets::Wipe(value);
  };
  std::set<std::string> seen;
  for (const SecretRequest& r : requests) {
    absl::StatusOr<secrets::SecretSpec> spec = secrets::ParseSecretSpec(r.spec);
    if (!spec.ok()) {
      wipe_staged();
      return spec.status();
    }
    if (!seen.insert(spec->name).second) {
      wipe_staged();
      return absl::InvalidArgumentError(
          absl::StrCat("secret ", spec->name, " is given twice; give each name once"));
    }
    std::string value;
    if (spec->kind() == secrets::SourceKind::kShared) {
      if (!r.value.empty()) {
        wipe_staged();
        return absl::InvalidArgumentError(absl::StrCat(
            "secret ", spec->name, ": shared sources are read by airlockd; send no value"));
      }
      absl::StatusOr<secrets::SecretSpec> granted = shared_.Grant(*spec, tenant);
      absl::StatusOr<std::string> read =
          granted.ok() ? ReadShared(*granted, tenant) : granted.status();
      if (!read.ok()) {
        wipe_staged();
        return read.status();
      }
      spec = *std::move(granted);
      value = *std::move(read);
    } else {
      if (r.value.empty()) {
        wipe_staged();
        return absl::InvalidArgumentError(
            absl::StrCat("secret ", spec->name, ": ", spec->source,
                         " is read by the client, with its user's rights, which sent no value; use "
                         "`airlock --secret` (or shared:NAME for a source the operator shares)"));
      }
      value = r.value;
      if (absl::Status s = secrets::CheckSecretValue(*spec, value); !s.ok()) {
        secrets::Wipe(value);
        wipe_staged();
        return s;
      }
    }
    auto it = std::find_if(grants.begin(), grants.end(),
                           [&](const SecretGrant& g) { return g.spec.name == spec->name; });
    if (it != grants.end()) {
      it->spec = *spec;  // the placeholder stays: the guest may have it stored somewhere
    } else {
      grants.push_back({*spec, secrets::MakePlaceholder(value.size())});
    }
    staged.emplace_back(spec->name, std::move(value));
  }
  if (grants.size() > secrets::kMaxSecretsPerSession) {
    wipe_staged();
    return absl::InvalidArgumentError(
        absl::StrCat("a session holds at most ", secrets::kMaxSecretsPerSession, " secrets"));
  }
  for (auto& [name, value] : staged) Hold(id, name, std::move(value));
  return grants;
}

absl::StatusOr<std::vector<SecretGrant>> SessionSecrets::Unbind(
    const std::string& id, const std::vector<std::string>& names,
    const std::vector<SecretGrant>& current) {
  std::vector<SecretGrant> grants = current;
  for (const std::string& name : names) {
    auto it = std::find_if(grants.begin(), grants.end(),
                           [&](const SecretGrant& g) { return g.spec.name == name; });
    if (it == grants.end()) {
      return absl::NotFoundError(absl::StrCat("session ", id, " has no secret ", name,
                                              "; `airlock secret ls ", id, "` lists them"));
    }
    grants.erase(it);
  }
  Drop(id, names);
  return grants;
}

void SessionSecrets::Drop(const std::string& id, const std::vector<std::string>& names) {
  absl::MutexLock lock(&mu_);
  auto values = values_.find(id);
  if (values == values_.end()) return;
  for (const std::string& name : names) {
    auto v = values->second.find(name);
    if (v == values->second.end()) continue;
    secrets::Wipe(v->second);
    values->second.erase(v);
  }
}

absl::Status SessionSecrets::Refresh(const std::string& id, const std::string& tenant,
                                     const std::vector<SecretGrant>& grants) {
  absl::Status first;
  for (const SecretGrant& g : grants) {
    if (g.spec.kind() != secrets::SourceKind::kShared) continue;
    absl::StatusOr<std::string> value = ReadShared(g.spec, tenant);
    if (!value.ok()) {
      if (first.ok()) first = value.status();
      Drop(id, {g.spec.name});  // the old value goes too: the source is not the tenant's now
      continue;
    }
    Hold(id, g.spec.name, *std::move(value));
  }
  return first;
}

void SessionSecrets::CopyValues(const std::string& from, const std::string& to) {
  std::map<std::string, std::string> copy;
  {
    absl::MutexLock lock(&mu_);
    auto it = values_.find(from);
    if (it == values_.end()) return;
    copy = it->second;
  }
  for (auto& [name, value] : copy) Hold(to, name, std::move(value));
}

void SessionSecrets::Forget(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = values_.find(id);
  if (it == values_.end()) return;
  for (auto& [name, value] : it->second) secrets::Wipe(value);
  values_.erase(it);
}

bool SessionSecrets::Available(const std::string& id, const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = values_.find(id);
  return it != values_.end() && it->second.count(name) != 0;
}

std::vector<net::ProxySecret> SessionSecrets::ForProxy(
    const std::string& id, const std::vector<SecretGrant>& grants) const {
  absl::MutexLock lock(&mu_);
  auto values = values_.find(id);
  std::vector<net::ProxySecret> out;
  for (const SecretGrant& g : grants) {
    net::ProxySecret p;
    p.name = g.spec.name;
    p.placeholder = g.placeholder;
    p.hosts = g.spec.hosts;
    p.body = g.spec.body;
    p.headers = g.spec.EffectiveHeaders();
    if (values != values_.end()) {
      auto v = values->second.find(g.spec.name);
      if (v != values->second.end()) p.value = v->second;
    }
    out.push_back(std::move(p));
  }
  return out;
}

absl::StatusOr<std::shared_ptr<net::SessionCa>> SessionSecrets::Ca(const std::string& dir,
                                                                   const std::string& id) {
  std::string key_path = absl::StrCat(dir, "/", kCaKeyFile);
  std::string cert_path = absl::StrCat(dir, "/", kCaCertFile);
  absl::StatusOr<std::string> key = ReadFileToString(key_path, 64 * 1024);
  absl::StatusOr<std::string> cert = ReadFileToString(cert_path, 64 * 1024);
  if (key.ok() && cert.ok()) {
    absl::StatusOr<std::shared_ptr<net::SessionCa>> ca = net::SessionCa::Load(*key, *cert);
    secrets::Wipe(*key);
    return ca;
  }
  absl::StatusOr<std::shared_ptr<net::SessionCa>> ca = net::SessionCa::Create(id);
  if (!ca.ok()) return ca.status();
  if (absl::Status s = MakeDirectories(dir, 0700); !s.ok()) return s;
  std::string pem = (*ca)->KeyPem();
  absl::Status written = WriteFileAtomically(key_path, pem, 0600);
  secrets::Wipe(pem);
  if (!written.ok()) return written;
  if (absl::Status s = WriteFileAtomically(cert_path, (*ca)->CertificatePem(), 0600); !s.ok()) {
    return s;
  }
  return ca;
}

absl::Status SessionSecrets::CopyCa(const std::string& from_dir, const std::string& to_dir) {
  for (const char* name : {kCaKeyFile, kCaCertFile}) {
    absl::StatusOr<std::string> content =
        ReadFileToString(absl::StrCat(from_dir, "/", name), 64 * 1024);
    if (absl::IsNotFound(content.status())) return absl::OkStatus();  // it has none
    if (!content.ok()) return content.status();
    if (absl::Status s = MakeDirectories(to_dir, 0700); !s.ok()) return s;
    absl::Status s = WriteFileAtomically(absl::StrCat(to_dir, "/", name), *content, 0600);
    secrets::Wipe(*content);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string SessionSecrets::GuestCaFor(const std::string& tenant) const {
  auto it = tenant_guest_ca_.find(tenant);
  return it == tenant_guest_ca_.end() ? guest_ca_ : guest_ca_ + it->second;
}

std::vector<std::string> SessionSecrets::GuestEnv(const std::string& tenant,
                                                  const std::vector<SecretGrant>& grants) const {
  std::vector<std::string> env;
  if (grants.empty() && GuestCaFor(tenant).empty()) return env;
  for (const char* var :
       {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT"}) {
    env.push_back(absl::StrCat(var, "=", kGuestCaBundle));
  }
  env.push_back(absl::StrCat("NODE_EXTRA_CA_CERTS=", kGuestCaFile));
  for (const SecretGrant& g : grants) env.push_back(absl::StrCat(g.spec.name, "=", g.placeholder));
  return env;
}

absl::Status SessionSecrets::InstallTrust(const std::string& tenant, GuestChannel& channel,
                                          const net::SessionCa* session_ca) const {
  std::string operators = GuestCaFor(tenant);
  std::string pems = operators;
  if (session_ca != nullptr) pems += session_ca->CertificatePem();
  if (pems.empty()) return absl::OkStatus();
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  absl::StatusOr<std::string> system = channel.ReadFile(kSystemBundle, kMaxGuestBundle, deadline);
  bool has_system = system.ok();
  std::string bundle = has_system ? *system : "";
  for (const std::string& pem :
       {operators, session_ca != nullptr ? session_ca->CertificatePem() : std::string()}) {
    if (pem.empty() || bundle.find(pem) != std::string::npos) continue;
    if (!bundle.empty() && bundle.back() != '\n') bundle += '\n';
    bundle += pem;
  }
  if (absl::Status s = channel.WriteFile(kGuestCaFile, 0644, pems, deadline); !s.ok()) return s;
  if (absl::Status s = channel.WriteFile(kGuestCaBundle, 0644, bundle, deadline); !s.ok()) {
    return s;
  }
  // Programs that read the system's bundle and no variable (Debian's curl, Python's ssl) trust
  // the CAs too; an image without one gets none.
  if (has_system) return channel.WriteFile(kSystemBundle, 0644, bundle, deadline);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadGuestCa(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path, 1 << 20);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("--guest-ca ", path, ": ", text.status().message()));
  }
  if (absl::StrContains(*text, "PRIVATE KEY")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--guest-ca ", path,
        " holds a private key; give a file of the CA's certificates only (every guest reads it)"));
  }
  std::unique_ptr<BIO, decltype(&BIO_free)> in(
      BIO_new_mem_buf(text->data(), static_cast<int>(text->size())), BIO_free);
  std::unique_ptr<BIO, decltype(&BIO_free)> out(BIO_new(BIO_s_mem()), BIO_free);
  int count = 0;
  for (;;) {
    std::unique_ptr<X509, decltype(&X509_free)> cert(
        PEM_read_bio_X509(in.get(), nullptr, nullptr, nullptr), X509_free);
    if (cert == nullptr) break;
    if (PEM_write_bio_X509(out.get(), cert.get()) != 1) {
      return absl::InternalError("could not write a certificate out");
    }
    ++count;
  }
  ERR_clear_error();
  // Every "BEGIN CERTIFICATE" must have parsed: a damaged one is an error, not a skip.
  size_t begun = 0;
  for (size_t at = text->find("-----BEGIN CERTIFICATE-----"); at != std::string::npos;
       at = text->find("-----BEGIN CERTIFICATE-----", at + 1)) {
    ++begun;
  }
  if (count == 0 || begun != static_cast<size_t>(count)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--guest-ca ", path,
        count == 0 ? " holds no PEM certificate" : " holds a certificate that does not parse",
        "; give the CA's certificate(s) as PEM (-----BEGIN CERTIFICATE-----)"));
  }
  char* data = nullptr;
  long size = BIO_get_mem_data(out.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

absl::StatusOr<std::unique_ptr<SessionSecrets>> MakeSessionSecrets(
    const std::string& upstream_ca_file, const std::string& guest_ca_file,
    const std::string& shared_file,
    const std::map<std::string, std::string>& tenant_guest_ca_files) {
  std::string guest_ca;
  if (!guest_ca_file.empty()) {
    absl::StatusOr<std::string> read = ReadGuestCa(guest_ca_file);
    if (!read.ok()) return read.status();
    guest_ca = *std::move(read);
  }
  absl::StatusOr<net::SslCtxPtr> upstream = net::UpstreamContext(upstream_ca_file);
  if (!upstream.ok()) return upstream.status();
  auto secrets =
      std::make_unique<SessionSecrets>(secrets::OnePasswordFromEnvironment(),
                                       std::shared_ptr<SSL_CTX>(upstream->release(), SSL_CTX_free));
  if (!shared_file.empty()) {
    absl::StatusOr<secrets::SharedSources> shared = secrets::SharedSources::Load(shared_file);
    if (!shared.ok()) return shared.status();
    secrets->set_shared(*std::move(shared));
  }
  secrets->set_guest_ca(std::move(guest_ca));
  for (const auto& [tenant, file] : tenant_guest_ca_files) {
    absl::StatusOr<std::string> read = ReadGuestCa(file);
    if (!read.ok()) {
      return absl::Status(read.status().code(),
                          absl::StrCat("for ", tenant, ": ", read.status().message()));
    }
    secrets->set_tenant_guest_ca(tenant, *std::move(read));
  }
  return secrets;
}

}  // namespace airlock
