#include "server/http_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include "server/http_framing.h"
#include "server/request_limits.h"
#include "util/crash_handler.h"

namespace kvserve {

namespace {

constexpr size_t kReadChunk = 16 * 1024;
constexpr auto kLinger = std::chrono::seconds(2);  // reading after a refusal, at most
constexpr size_t kLingerBytes = 1u << 20;          // ... or this many bytes

int Millis(std::chrono::steady_clock::duration d) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
}

std::chrono::steady_clock::duration Seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

// Waits for `events` on `fd` up to `timeout_ms`; true when ready.
bool WaitFor(int fd, short events, int timeout_ms) {
  pollfd p{.fd = fd, .events = events, .revents = 0};
  for (;;) {
    const int r = poll(&p, 1, timeout_ms);
    if (r > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

void Address(const sockaddr_storage& address, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    port = ntohs(in->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    port = ntohs(in6->sin6_port);
  }
  ip = text;
}

const char* Reason(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 414:
      return "URI Too Long";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

std::string CannedResponse(const ApiError& error) {
  const std::string body = error.Body();
  std::string text =
      "HTTP/1.1 " + std::to_string(error.http_status) + " " + Reason(error.http_status) +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n";
  if (error.retry_after_s > 0)
    text += "Retry-After: " + std::to_string(error.retry_after_s) + "\r\n";
  return text + "\r\n" + body;
}

}  // namespace

namespace {

// One read or write of at most `n` bytes without blocking, in the clear or through TLS: > 0 bytes,
// 0 the end of the stream, kWouldBlock (then `*wait` says for what), kFailed.
constexpr ssize_t kWouldBlock = -1, kFailed = -2;

ssize_t TlsResult(SSL* ssl, int r, short* wait) {
  if (r > 0) return r;
  switch (SSL_get_error(ssl, r)) {
    case SSL_ERROR_WANT_READ:
      *wait = POLLIN;
      return kWouldBlock;
    case SSL_ERROR_WANT_WRITE:
      *wait = POLLOUT;
      return kWouldBlock;
    case SSL_ERROR_ZERO_RETURN:
      return 0;
    default:
      return kFailed;
  }
}

ssize_t RecvSome(int fd, SSL* ssl, char* buffer, size_t n, short* wait) {
  if (ssl != nullptr) {
    ERR_clear_error();
    return TlsResult(ssl, SSL_read(ssl, buffer, static_cast<int>(std::min<size_t>(n, 1 << 30))),
                     wait);
  }
  for (;;) {
    const ssize_t r = recv(fd, buffer, n, MSG_DONTWAIT);
    if (r >= 0) return r;
    if (errno == EINTR) continue;
    *wait = POLLIN;
    return errno == EAGAIN || errno == EWOULDBLOCK ? kWouldBlock : kFailed;
  }
}

ssize_t SendSome(int fd, SSL* ssl, const char* data, size_t n, short* wait) {
  if (ssl != nullptr) {
    ERR_clear_error();
    return TlsResult(ssl, SSL_write(ssl, data, static_cast<int>(std::min<size_t>(n, 1 << 30))),
                     wait);
  }
  for (;;) {
    const ssize_t r = send(fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r >= 0) return r;
    if (errno == EINTR) continue;
    *wait = POLLOUT;
    return errno == EAGAIN || errno == EWOULDBLOCK ? kWouldBlock : kFailed;
  }
}

// Stops sending: close_notify first under TLS (best effort, without blocking), then FIN.
void ShutdownWrite(int fd, SSL* ssl) {
  if (ssl != nullptr) {
    ERR_clear_error();
    SSL_shutdown(ssl);
  }
  shutdown(fd, SHUT_WR);
}

std::string TlsErrors() {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    char line[256];
    ERR_error_string_n(code, line, sizeof(line));
    if (!text.empty()) text += "; ";
    text += line;
  }
  return text.empty() ? "unknown TLS error" : text;
}

}  // namespace

struct HttpListener::Connection {
  enum class Phase { kHandshake, kIdle, kArriving, kClosing };

  int fd = -1;
  SSL* ssl = nullptr;       // HTTPS: the TLS session over fd; plain HTTP: null
  short wait_for = POLLIN;  // what the last read or handshake waits for (TLS may need POLLOUT)
  std::string remote_ip, local_ip;
  int remote_port = 0, local_port = 0;
  std::string in;  // received and not yet read by a request
  Phase phase = Phase::kIdle;
  Clock::time_point deadline;          // the loop gives up on the connection then
  Clock::time_point request_deadline;  // the current request must have arrived by then
  size_t head_end = 0;                 // 0 until the head is complete
  size_t need = 0;                     // bytes of `in` to have before a worker gets it
  size_t content_length = 0;
  bool chunked = false;
  int served = 0;  // requests answered on this connection
  size_t discarded = 0;

  void StartRequest(Clock::time_point now, double timeout_s) {
    phase = Phase::kArriving;
    request_deadline = deadline = now + Seconds(timeout_s);
    head_end = need = content_length = 0;
    chunked = false;
  }
};

// httplib's view of one request on a connection: reads come from what the loop buffered, then
// from the socket within the request's deadline; writes wait for room up to the write timeout.
// A chunked body reaches httplib only through ChunkedBodyCheck, as far as it is valid: at a fault
// the stream answers the 400 itself (naming the fault), reads and writes fail from then on, so
// httplib's own answer is dropped, and the connection is closed; nothing after the body's end is
// read by this request.
class HttpListener::ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(Connection& connection, const ListenerOptions& options)
      : c_(connection), write_timeout_ms_(Millis(Seconds(options.write_timeout_s))) {
    if (c_.chunked) {
      chunked_.emplace();
      checked_ = c_.head_end;  // the head was checked by the loop
    }
  }

  bool is_readable() const override {
    return pos_ < c_.in.size() || (c_.ssl != nullptr && SSL_pending(c_.ssl) > 0) ||
           WaitFor(c_.fd, POLLIN, Millis(c_.request_deadline - Clock::now()));
  }
  bool is_writable() const override {
    if (!WaitFor(c_.fd, POLLOUT, write_timeout_ms_)) return false;
    char byte;
    const ssize_t n = recv(c_.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));  // 0: the peer left
  }

  ssize_t read(char* ptr, size_t size) override {
    for (;;) {
      if (chunked_ && chunked_->error()) return RefuseBody(*chunked_->error());
      if (pos_ < Readable()) break;
      if (chunked_ && chunked_->done()) return 0;
      if (chunked_ && checked_ < c_.in.size()) {
        checked_ += chunked_->Feed(std::string_view(c_.in).substr(checked_));
      } else if (!Fill()) {
        return failed_ ? -1 : 0;
      }
    }
    const size_t n = std::min(size, Readable() - pos_);
    std::memcpy(ptr, c_.in.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (refused_) return -1;
    const auto deadline = Clock::now() + std::chrono::milliseconds(write_timeout_ms_);
    for (;;) {
      short wait = POLLOUT;
      const ssize_t n = SendSome(c_.fd, c_.ssl, ptr, size, &wait);
      if (n > 0) return n;
      if (n != kWouldBlock || !WaitFor(c_.fd, wait, Millis(deadline - Clock::now()))) {
        failed_ = true;
        return -1;
      }
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = c_.remote_ip;
    port = c_.remote_port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = c_.local_ip;
    port = c_.local_port;
  }
  socket_t socket() const override { return c_.fd; }

  // Bytes the request read; the rest of the buffer is kept for the next request.
  size_t consumed() const { return pos_; }
  bool failed() const { return failed_; }
  void Compact() {
    c_.in.erase(0, pos_);
    if (chunked_) checked_ -= pos_;
    pos_ = 0;
  }

 private:
  // The end of what httplib may read from `in`: all of it, or up to where a chunked body's check
  // has come.
  size_t Readable() const { return chunked_ ? checked_ : c_.in.size(); }

  // Answers a chunked body's framing fault (once) and fails the read.
  ssize_t RefuseBody(const ApiError& error) {
    if (!refused_) {
      const std::string text = CannedResponse(error);
      for (size_t sent = 0; sent < text.size();) {
        const ssize_t n = write(text.data() + sent, text.size() - sent);
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
      }
      refused_ = failed_ = true;
    }
    return -1;
  }

  // Appends what the socket has (waiting until the request deadline); false at its end.
  bool Fill() {
    Compact();
    char buffer[kReadChunk];
    for (;;) {
      short wait = POLLIN;
      const ssize_t n = RecvSome(c_.fd, c_.ssl, buffer, sizeof(buffer), &wait);
      if (n > 0) {
        c_.in.append(buffer, static_cast<size_t>(n));
        return true;
      }
      if (n == 0) return false;
      const int left_ms = Millis(c_.request_deadline - Clock::now());
      if (n != kWouldBlock || left_ms <= 0 || !WaitFor(c_.fd, wait, left_ms)) {
        failed_ = true;
        return false;
      }
    }
  }

  Connection& c_;
  int write_timeout_ms_;
  size_t pos_ = 0;                           // of `in`: the next byte httplib reads
  std::optional<ChunkedBodyCheck> chunked_;  // a chunked request's body check
  size_t checked_ = 0;                       // of `in`: where the body check has come
  bool failed_ = false;
  bool refused_ = false;  // a body fault was answered: httplib's own answer is dropped
};

HttpListener::HttpListener(ListenerOptions options) : options_(std::move(options)) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

HttpListener::~HttpListener() {
  Halt();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  if (tls_ != nullptr) SSL_CTX_free(tls_);
}

Status HttpListener::LoadTls() {
  if (options_.tls_cert_file.empty() && options_.tls_key_file.empty()) return Status::Ok();
  if (options_.tls_cert_file.empty() || options_.tls_key_file.empty()) {
    return Status::InvalidArgument("HTTPS needs both --ssl-cert and --ssl-key");
  }
  ERR_clear_error();
  tls_ = SSL_CTX_new(TLS_server_method());
  if (tls_ == nullptr) return Status::Internal("cannot create a TLS context: " + TlsErrors());
  SSL_CTX_set_min_proto_version(tls_, TLS1_2_VERSION);
  SSL_CTX_set_mode(tls_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(tls_, options_.tls_cert_file.c_str()) != 1) {
    return Status::InvalidArgument("--ssl-cert '" + options_.tls_cert_file + "': " + TlsErrors());
  }
  if (SSL_CTX_use_PrivateKey_file(tls_, options_.tls_key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return Status::InvalidArgument("--ssl-key '" + options_.tls_key_file + "': " + TlsErrors());
  }
  if (SSL_CTX_check_private_key(tls_) != 1) {
    return Status::InvalidArgument("--ssl-key '" + options_.tls_key_file +
                                   "' does not match --ssl-cert '" + options_.tls_cert_file + "'");
  }
  return Status::Ok();
}

Result<int> HttpListener::Bind(const std::string& host, int port) {
  if (Status tls = LoadTls(); !tls.ok()) return tls;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int r = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); r != 0) {
    return Result<int>::InvalidArgument("cannot resolve host '" + host + "': " + gai_strerror(r));
  }
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 511) == 0) {
      listen_fd_ = fd;
      break;
    }
    why = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(found);
  if (listen_fd_ < 0) {
    return Result<int>::InvalidArgument("cannot bind to " + host + ":" + service + ": " + why);
  }
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
  std::string ip;
  int bound = 0;
  Address(address, ip, bound);
  svr_sock_ = listen_fd_;  // httplib ends streamed responses when this turns INVALID_SOCKET
  return bound;
}

void HttpListener::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

void HttpListener::Halt() {
  stopping_.store(true);
  svr_sock_ = INVALID_SOCKET;
  if (wake_fd_ >= 0) Wake();
}

void HttpListener::Close(std::unique_ptr<Connection> connection) {
  if (!connection) return;
  if (connection->ssl != nullptr) SSL_free(connection->ssl);
  close(connection->fd);
  open_.fetch_sub(1);
}

void HttpListener::Refuse(Connection& connection, const ApiError& error, Clock::time_point now) {
  const std::string text = CannedResponse(error);
  short wait = POLLOUT;
  [[maybe_unused]] const ssize_t n =
      SendSome(connection.fd, connection.ssl, text.data(), text.size(), &wait);
  ShutdownWrite(connection.fd, connection.ssl);
  connection.phase = Connection::Phase::kClosing;
  connection.wait_for = POLLIN;
  connection.deadline = now + kLinger;
  connection.in.clear();
  if (options_.on_refused) options_.on_refused(error.http_status);
}

void HttpListener::AcceptAll(Clock::time_point now) {
  for (;;) {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        accept_paused_until_ = now + std::chrono::milliseconds(100);
      }
      return;
    }
    if (open_.load() >= options_.max_connections) {
      const ApiError error{.http_status = 503,
                           .message = "too many open connections (" +
                                      std::to_string(options_.max_connections) +
                                      ", --max-connections); try again",
                           .type = "service_unavailable",
                           .code = "too_many_connections",
                           .retry_after_s = 1};
      if (tls_ == nullptr) {  // under TLS there is no session to answer in: only the close
        const std::string text = CannedResponse(error);
        [[maybe_unused]] const ssize_t n =
            send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      close(fd);
      if (options_.on_refused) options_.on_refused(503);
      continue;
    }
    open_.fetch_add(1);
    if (options_.send_buffer_bytes > 0) {
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &options_.send_buffer_bytes,
                 sizeof(options_.send_buffer_bytes));
    }
    auto connection = std::make_unique<Connection>();
    connection->fd = fd;
    Address(address, connection->remote_ip, connection->remote_port);
    sockaddr_storage local{};
    length = sizeof(local);
    getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length);
    Address(local, connection->local_ip, connection->local_port);
    connection->deadline = now + Seconds(options_.idle_timeout_s);
    if (tls_ != nullptr) {
      connection->ssl = SSL_new(tls_);
      if (connection->ssl == nullptr || SSL_set_fd(connection->ssl, fd) != 1) {
        Close(std::move(connection));
        continue;
      }
      SSL_set_accept_state(connection->ssl);
      connection->phase = Connection::Phase::kHandshake;
      connection->deadline = now + Seconds(options_.request_timeout_s);
    }
    waiting_.push_back(std::move(connection));
  }
}

bool HttpListener::OnReadable(std::unique_ptr<Connection>& connection, Clock::time_point now) {
  Connection& c = *connection;
  if (c.phase == Connection::Phase::kHandshake) {
    ERR_clear_error();
    const ssize_t r = TlsResult(c.ssl, SSL_do_handshake(c.ssl), &c.wait_for);
    if (r == kWouldBlock) return true;
    if (r <= 0) {  // not TLS (plain HTTP on an HTTPS port), or a failed handshake
      Close(std::move(connection));
      return false;
    }
    c.phase = Connection::Phase::kIdle;
    c.deadline = now + Seconds(options_.idle_timeout_s);
    // The request may have come with the handshake's last flight: read on.
  }
  const size_t cap = kMaxHeaderBytes + options_.max_body_bytes + kReadChunk;
  char buffer[kReadChunk];
  bool peer_closed = false;
  c.wait_for = POLLIN;
  while (c.phase == Connection::Phase::kClosing || c.in.size() < cap) {
    const ssize_t n = RecvSome(c.fd, c.ssl, buffer, sizeof(buffer), &c.wait_for);
    if (n > 0) {
      if (c.phase == Connection::Phase::kClosing) {
        c.discarded += static_cast<size_t>(n);
        if (c.discarded > kLingerBytes) peer_closed = true;
        if (peer_closed) break;
        continue;
      }
      if (c.phase == Connection::Phase::kIdle) c.StartRequest(now, options_.request_timeout_s);
      c.in.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n == kWouldBlock) break;
    peer_closed = true;  // end of stream or an error
    break;
  }
  if (c.phase == Connection::Phase::kClosing) {
    if (peer_closed) Close(std::move(connection));
    return connection != nullptr;
  }
  if (c.phase == Connection::Phase::kArriving) TryDispatch(connection, now);
  // A client that half-closed after a complete request was handed on above; otherwise it left.
  if (connection && peer_closed && connection->phase != Connection::Phase::kClosing) {
    Close(std::move(connection));
  }
  return connection != nullptr;
}

void HttpListener::TryDispatch(std::unique_ptr<Connection>& connection, Clock::time_point now) {
  Connection& c = *connection;
  if (c.head_end == 0) {
    const HeadScan scan = ScanRequestHead(c.in);
    if (scan.error) return Refuse(c, *scan.error, now);
    if (scan.end == 0) return;
    const RequestFraming framing = CheckRequestHead(std::string_view(c.in).substr(0, scan.end));
    if (framing.error) return Refuse(c, *framing.error, now);
    c.head_end = scan.end;
    c.chunked = framing.chunked;
    c.need = c.head_end;
    // Bodies within the limit arrive here, in the loop; httplib answers a larger one 413 unread,
    // and reads a chunked one (through ConnectionStream's check) or one sent after "100
    // Continue" itself, within the deadline.
    c.content_length = static_cast<size_t>(framing.content_length);  // at most 18 digits
    if (!c.chunked && !framing.expect_continue && c.content_length <= options_.max_body_bytes) {
      c.need += c.content_length;
    }
  }
  if (c.in.size() < c.need) return;
  Connection* raw = connection.release();
  workers_->enqueue([this, raw] { Work(std::unique_ptr<Connection>(raw)); });
}

void HttpListener::OnDeadline(std::unique_ptr<Connection>& connection) {
  Connection& c = *connection;
  if (c.phase == Connection::Phase::kHandshake) return Close(std::move(connection));
  if (c.phase == Connection::Phase::kArriving) {
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%g", options_.request_timeout_s);
    Refuse(c,
           ApiError{.http_status = 408,
                    .message = std::string("the request did not arrive within ") + seconds +
                               " s of its first byte (--read-timeout)",
                    .code = "request_timeout"},
           Clock::now());
    return;
  }
  Close(std::move(connection));  // idle past the keep-alive timeout, or done lingering
}

void HttpListener::Work(std::unique_ptr<Connection> connection) {
  ArmThreadForCrashReports();
  Connection& c = *connection;
  ConnectionStream stream(c, options_);
  const bool last = c.served + 1 >= options_.max_requests_per_connection || stopping_.load();
  bool closed_by_client = false;
  const bool ok = process_request(stream, last, closed_by_client, nullptr);
  ++c.served;
  // Keep the connection only when the request read exactly what it declared, so the next bytes
  // are the next request's: not after a chunked body, nor a body a handler left unread.
  const bool reusable = ok && !last && !closed_by_client && !stream.failed() && !c.chunked &&
                        stream.consumed() == c.head_end + c.content_length;
  stream.Compact();
  if (stopping_.load()) return Close(std::move(connection));
  if (reusable) {
    c.phase = Connection::Phase::kIdle;
  } else {
    // Unread input may remain (a body the handler refused unread): closing now would reset the
    // connection and could destroy the answer before the client reads it, so linger in the loop.
    ShutdownWrite(c.fd, c.ssl);
    c.phase = Connection::Phase::kClosing;
    c.wait_for = POLLIN;
    c.in.clear();
  }
  {
    std::lock_guard lock(returned_mutex_);
    returned_.push_back(std::move(connection));
  }
  Wake();
}

void HttpListener::TakeReturned(Clock::time_point now) {
  std::vector<std::unique_ptr<Connection>> returned;
  {
    std::lock_guard lock(returned_mutex_);
    returned.swap(returned_);
  }
  for (auto& connection : returned) {
    if (connection->phase == Connection::Phase::kClosing) {
      connection->deadline = now + kLinger;
      waiting_.push_back(std::move(connection));
      continue;
    }
    connection->deadline = now + Seconds(options_.idle_timeout_s);
    connection->wait_for = POLLIN;
    if (connection->ssl != nullptr && SSL_pending(connection->ssl) > 0) {
      OnReadable(connection, now);  // decrypted bytes the socket's readiness will not announce
    } else if (!connection->in.empty()) {  // pipelined: the next request is (partly) here
      connection->StartRequest(now, options_.request_timeout_s);
      TryDispatch(connection, now);
    }
    if (connection) waiting_.push_back(std::move(connection));
  }
}

bool HttpListener::Serve() {
  ArmThreadForCrashReports();
  if (listen_fd_ < 0 || wake_fd_ < 0) return false;
  serving_.store(true);
  workers_ =
      std::make_unique<httplib::ThreadPool>(static_cast<size_t>(std::max(1, options_.workers)));
  std::vector<pollfd> fds;
  while (!stopping_.load()) {
    Clock::time_point now = Clock::now();
    TakeReturned(now);
    fds.clear();
    const bool accepting = now >= accept_paused_until_;
    fds.push_back({.fd = wake_fd_, .events = POLLIN, .revents = 0});
    fds.push_back({.fd = accepting ? listen_fd_ : -1, .events = POLLIN, .revents = 0});
    Clock::time_point next = now + std::chrono::seconds(1);
    for (const auto& connection : waiting_) {
      fds.push_back({.fd = connection->fd, .events = connection->wait_for, .revents = 0});
      next = std::min(next, connection->deadline);
    }
    if (!accepting) next = std::min(next, accept_paused_until_);
    const int r = poll(fds.data(), fds.size(), Millis(next - now) + 1);
    if (r < 0 && errno != EINTR) break;
    now = Clock::now();
    if (fds[0].revents != 0) {
      uint64_t count;
      [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &count, sizeof(count));
    }
    const size_t polled = fds.size() - 2;  // waiting_[0, polled) were in this poll
    for (size_t i = 0; i < polled; ++i) {
      auto& connection = waiting_[i];
      if ((fds[i + 2].revents & (POLLIN | POLLOUT | POLLHUP | POLLERR)) != 0) {
        OnReadable(connection, now);
      }
      if (connection && now >= connection->deadline) OnDeadline(connection);
    }
    waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), nullptr), waiting_.end());
    if (fds[1].revents != 0) AcceptAll(now);
  }
  close(listen_fd_);
  listen_fd_ = -1;
  for (auto& connection : waiting_) Close(std::move(connection));
  waiting_.clear();
  workers_->shutdown();  // runs what is queued (each answers or closes), then joins
  TakeReturned(Clock::now());
  for (auto& connection : waiting_) Close(std::move(connection));
  waiting_.clear();
  serving_.store(false);
  return true;
}

}  // namespace kvserve
