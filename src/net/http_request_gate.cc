#include "src/net/http_request_gate.h"

#include <http_parser.h>

#include <span>

#include "absl/strings/str_cat.h"
#include "src/net/http_request_head.h"

namespace airlock::net {

struct HttpRequestGate::Parser {
  http_parser parser;
  http_parser_settings settings;
  bool complete = false;
};

namespace {

// What a guest may send after an upgrade request before the server answers it.
constexpr size_t kMaxHeldForUpgrade = 64 * 1024;

int OnMessageComplete(http_parser* p) {
  *static_cast<bool*>(p->data) = true;  // Parser::complete
  http_parser_pause(p, 1);  // execute returns here: the next request starts after this byte
  return 0;
}

}  // namespace

HttpRequestGate::HttpRequestGate(std::string host)
    : host_(std::move(host)), parser_(std::make_unique<Parser>()) {}

HttpRequestGate::~HttpRequestGate() = default;

absl::Status HttpRequestGate::FromGuest(std::string_view data, std::string* forward) {
  if (state_ == State::kFailed) return failure_;
  if (state_ == State::kOpaque) {
    forward->append(data);
    return absl::OkStatus();
  }
  held_.append(data);
  if (state_ == State::kUpgradeAsked && held_.size() > kMaxHeldForUpgrade) {
    state_ = State::kFailed;
    failure_ = absl::InvalidArgumentError(
        "the guest sent more than 64 KiB after asking to upgrade, before the server agreed");
    held_.clear();
    return failure_;
  }
  return Run(forward);
}

absl::Status HttpRequestGate::FromServer(std::string_view data, std::string* forward) {
  if (state_ != State::kUpgradeAsked) return absl::OkStatus();
  server_start_.append(data.substr(0, 16 - std::min<size_t>(16, server_start_.size())));
  // "HTTP/1.1 101 " is all it takes to know; fewer bytes so far: wait for more.
  constexpr std::string_view k11 = "HTTP/1.1 101 ", k10 = "HTTP/1.0 101 ";
  if (server_start_.size() < k11.size()) {
    if (k11.substr(0, server_start_.size()) == server_start_ ||
        k10.substr(0, server_start_.size()) == server_start_) {
      return absl::OkStatus();
    }
  }
  if (server_start_.rfind(k11, 0) == 0 || server_start_.rfind(k10, 0) == 0) {
    state_ = State::kOpaque;
    forward->append(held_);
    held_.clear();
    return absl::OkStatus();
  }
  // Refused (or answered as a plain request): the guest's next bytes are a request again.
  state_ = State::kHead;
  server_start_.clear();
  return Run(forward);
}

absl::Status HttpRequestGate::Run(std::string* forward) {
  auto fail = [&](absl::Status status) {
    state_ = State::kFailed;
    failure_ = status;
    held_.clear();
    return status;
  };
  while (!held_.empty()) {
    if (state_ == State::kHead) {
      HttpRequestHead head;
      std::string error;
      HeadResult r = PeekHttpRequestHead(
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(held_.data()), held_.size()),
          &head, &error);
      if (r == HeadResult::kNeedMore) return absl::OkStatus();
      if (r == HeadResult::kMalformed) return fail(absl::InvalidArgumentError(error));
      if (head.host != host_) {
        return fail(absl::PermissionDeniedError(
            absl::StrCat("a request on it names ", head.host, " in its HTTP Host")));
      }
      http_parser_init(&parser_->parser, HTTP_REQUEST);
      http_parser_settings_init(&parser_->settings);
      parser_->settings.on_message_complete = OnMessageComplete;
      parser_->parser.data = &parser_->complete;
      parser_->complete = false;
      state_ = State::kBody;
    }
    if (state_ != State::kBody) return absl::OkStatus();
    size_t n =
        http_parser_execute(&parser_->parser, &parser_->settings, held_.data(), held_.size());
    http_errno err = HTTP_PARSER_ERRNO(&parser_->parser);
    if (err != HPE_OK && err != HPE_PAUSED) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("an HTTP request on it is malformed: ", http_errno_description(err))));
    }
    if (parser_->parser.upgrade) {
      // The head asked to upgrade; n ends it. What follows waits for the server's answer.
      forward->append(held_, 0, n);
      held_.erase(0, n);
      state_ = State::kUpgradeAsked;
      server_start_.clear();
      return absl::OkStatus();
    }
    forward->append(held_, 0, n);
    held_.erase(0, n);
    if (!parser_->complete) return absl::OkStatus();  // the body goes on in later bytes
    http_parser_pause(&parser_->parser, 0);
    state_ = State::kHead;
  }
  return absl::OkStatus();
}

}  // namespace airlock::net
