// The sockets under HttpServer. One poll loop accepts connections and holds every connection
// that is idle (keep-alive) or still arriving, without a thread each; a worker thread gets a
// connection only when a whole request head has arrived, and its body too when it has a
// Content-Length within --max-body. httplib's Server::process_request then parses, routes and
// answers it over a Stream that reads what the loop buffered. So idle or slow clients (one byte a
// second) cannot take the worker threads, and each request must arrive within one deadline.
//
//   HttpListener listener(ListenerOptions{.workers = 32});
//   listener.Post("/x", ...);                    // httplib's route table, as on httplib::Server
//   auto port = listener.Bind("127.0.0.1", 0);   // 0: any free port
//   std::thread t([&] { listener.Serve(); });
//   ...
//   listener.Halt(); t.join();
//
// Refused without a worker, with an OpenAI-style body and "Connection: close": a head beyond
// kMaxHeaderBytes or kMaxHeaderCount lines or with a header line beyond kMaxHeaderLineBytes (431),
// a request line beyond kMaxRequestLineBytes (414), a head whose framing could be read two ways
// (CheckRequestHead in server/http_framing.h: 400, 411 or 501), a request not complete within
// request_timeout_s of its first byte (408), a connection beyond max_connections (503). A chunked
// body's framing is checked as httplib reads it (ChunkedBodyCheck): 400 and closed at a fault.
//
// Thread rules: Bind and Halt from the owner's thread, Serve on one thread; routes run on the
// workers. httplib's listen/stop/set_*_timeout are not used (this class replaces them).
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "util/status.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace kvserve {

struct ListenerOptions {
  int workers = 32;                  // threads that run requests; a stream holds one while it lasts
  int max_connections = 512;         // open at once; beyond it a new one gets 503 and is closed
  double request_timeout_s = 10;     // from a request's first byte until its head (and body) is in
  double idle_timeout_s = 5;         // keep-alive: a connection with no new request is closed
  double write_timeout_s = 10;       // a client that reads nothing for this long is cut off
  size_t max_body_bytes = 4u << 20;  // Content-Length bodies up to this are read by the loop
  int max_requests_per_connection = 100;  // then "Connection: close"
  // The kernel's send buffer per connection (SO_SNDBUF; it would grow to 4 MiB): bounds the
  // memory a client that never reads can pin, and makes its writes stall into write_timeout_s.
  int send_buffer_bytes = 256 * 1024;
  std::function<void(int status)> on_refused;  // each 408/431/503 the loop answers itself
  // HTTPS when both are set (PEM files; the certificate file may hold the chain): every
  // connection is TLS 1.2 or later, its handshake within request_timeout_s, and the loop and the
  // workers read and write through it; plain HTTP on the port is closed unanswered.
  std::string tls_cert_file, tls_key_file;
};

class HttpListener : public httplib::Server {
 public:
  explicit HttpListener(ListenerOptions options);
  ~HttpListener() override;
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Loads the TLS certificate and key when set, then creates the listening socket; the port
  // bound (the free one chosen when `port` is 0).
  Result<int> Bind(const std::string& host, int port);
  // Serves until Halt(); false if Bind did not succeed. Returns after the workers finished.
  bool Serve();
  // Closes the listener and ends Serve(); streams being written see httplib's "shutting down".
  void Halt();
  bool serving() const { return serving_.load(); }
  int open_connections() const { return open_.load(); }

 private:
  struct Connection;
  class ConnectionStream;
  using Clock = std::chrono::steady_clock;

  void AcceptAll(Clock::time_point now);
  // Reads what arrived; false when the connection is finished (closed or handed on).
  bool OnReadable(std::unique_ptr<Connection>& connection, Clock::time_point now);
  // Hands a complete request to a worker (then `connection` is empty), refuses a bad head, or
  // waits for more bytes.
  void TryDispatch(std::unique_ptr<Connection>& connection, Clock::time_point now);
  void OnDeadline(std::unique_ptr<Connection>& connection);
  // Answers `error` itself and lingers briefly reading what the client still sends, so that the
  // answer is not lost to a reset.
  void Refuse(Connection& connection, const ApiError& error, Clock::time_point now);
  void Work(std::unique_ptr<Connection> connection);
  void Close(std::unique_ptr<Connection> connection);
  void TakeReturned(Clock::time_point now);
  void Wake();
  Status LoadTls();

  ListenerOptions options_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;           // eventfd: a worker returned a connection, or Halt()
  ssl_ctx_st* tls_ = nullptr;  // owned; null: plain HTTP
  std::atomic<bool> stopping_{false};
  std::atomic<bool> serving_{false};
  std::atomic<int> open_{0};
  std::unique_ptr<httplib::ThreadPool> workers_;
  std::vector<std::unique_ptr<Connection>> waiting_;  // the loop's own; no lock
  std::mutex returned_mutex_;
  std::vector<std::unique_ptr<Connection>> returned_;  // from workers, for keep-alive
  Clock::time_point accept_paused_until_{};            // after EMFILE
};

}  // namespace kvserve
