#include "src/guest/user_lookup.h"

#include <algorithm>
#include <cstdint>
#include <sstream>

namespace airlock::guest {
namespace {

// A database line split at ':'.
std::vector<std::string> Fields(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, ':')) out.push_back(field);
  if (!line.empty() && line.back() == ':') out.emplace_back();
  return out;
}

// A decimal id below 2^32-1 (that value is "no id" to the kernel).
bool ParseId(const std::string& text, uint32_t* id) {
  if (text.empty() || text.size() > 10) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v >= UINT32_MAX) return false;
  *id = static_cast<uint32_t>(v);
  return true;
}

// Every line of a database with at least `min_fields` fields.
std::vector<std::vector<std::string>> Entries(const std::string& text, size_t min_fields) {
  std::vector<std::vector<std::string>> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = Fields(line);
    if (f.size() >= min_fields) out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

bool ResolveUser(const std::string& spec, const std::string& passwd, const std::string& group,
                 Identity* out, std::string* error) {
  *out = Identity{};
  std::string user = spec.substr(0, spec.find(':'));
  std::string grp = spec.find(':') == std::string::npos ? "" : spec.substr(spec.find(':') + 1);
  if (user.empty()) user = "0";
  // passwd: name:password:uid:gid:gecos:home:shell
  std::vector<std::vector<std::string>> users = Entries(passwd, 7);
  uint32_t id;
  bool numeric = ParseId(user, &id);
  const std::vector<std::string>* entry = nullptr;
  for (const std::vector<std::string>& u : users) {
    uint32_t uid;
    if (numeric ? ParseId(u[2], &uid) && uid == id : u[0] == user) {
      entry = &u;
      break;
    }
  }
  std::string name;
  if (entry != nullptr) {
    uint32_t uid, gid;
    if (!ParseId((*entry)[2], &uid) || !ParseId((*entry)[3], &gid)) {
      *error = "user " + user + ": its /etc/passwd entry has no valid uid and gid";
      return false;
    }
    out->uid = uid;
    out->gid = gid;
    out->home = (*entry)[5].empty() ? "/" : (*entry)[5];
    name = (*entry)[0];
  } else if (numeric) {
    out->uid = id;
    if (id == 0) out->home = "/root";
  } else {
    *error = "user " + user + " is not in the image's /etc/passwd";
    return false;
  }
  // group: name:password:gid:member,member
  std::vector<std::vector<std::string>> groups = Entries(group, 3);
  if (!grp.empty()) {
    bool found = false;
    if (ParseId(grp, &id)) {
      out->gid = id;
      found = true;
    } else {
      for (const std::vector<std::string>& g : groups) {
        if (g[0] == grp && ParseId(g[2], &id)) {
          out->gid = id;
          found = true;
          break;
        }
      }
    }
    if (!found) {
      *error = "group " + grp + " is not in the image's /etc/group";
      return false;
    }
  }
  out->groups.push_back(out->gid);
  if (!name.empty()) {
    for (const std::vector<std::string>& g : groups) {
      if (g.size() < 4 || !ParseId(g[2], &id)) continue;
      std::istringstream members(g[3]);
      std::string m;
      while (std::getline(members, m, ',')) {
        if (m == name &&
            std::find(out->groups.begin(), out->groups.end(), id) == out->groups.end()) {
          out->groups.push_back(id);
        }
      }
    }
  }
  return true;
}

std::map<uint32_t, std::string> IdNames(const std::string& database) {
  std::map<uint32_t, std::string> names;
  for (const std::vector<std::string>& entry : Entries(database, 3)) {
    uint32_t id;
    if (ParseId(entry[2], &id) && !entry[0].empty()) names.emplace(id, entry[0]);
  }
  return names;
}

}  // namespace airlock::guest
