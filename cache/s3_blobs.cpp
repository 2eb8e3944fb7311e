#include "cache/s3_blobs.h"

#include <curl/curl.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "base/sha256.h"

namespace mlk::cache {

namespace {

std::string url_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::strtol(s.substr(i + 1, 2).c_str(), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

size_t collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

struct Upload {
  std::string_view body;
  size_t off = 0;
};

size_t feed(char* buf, size_t size, size_t n, void* in) {
  auto* u = static_cast<Upload*>(in);
  size_t k = std::min(size * n, u->body.size() - u->off);
  std::memcpy(buf, u->body.data() + u->off, k);
  u->off += k;
  return k;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

Expected<S3Spec> parse_s3_spec(const std::string& spec) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("--blobs `" + spec + "`: " + why +
                                   "; expected s3://BUCKET?endpoint=http://HOST:PORT[&region=REGION]");
  };
  if (spec.rfind("s3://", 0) != 0) return bad("not an s3:// URL");
  S3Spec s;
  std::string rest = spec.substr(5);
  size_t q = rest.find('?');
  s.bucket = rest.substr(0, q);
  if (s.bucket.empty() || s.bucket.find('/') != std::string::npos) return bad("no bucket name, or a `/` in it");
  std::map<std::string, std::string> params;
  if (q != std::string::npos) {
    std::string query = rest.substr(q + 1);
    size_t start = 0;
    while (start < query.size()) {
      size_t amp = query.find('&', start);
      std::string item = query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
      size_t eq = item.find('=');
      if (eq == std::string::npos) return bad("`" + item + "` is not NAME=VALUE");
      params[item.substr(0, eq)] = url_decode(item.substr(eq + 1));
      if (amp == std::string::npos) break;
      start = amp + 1;
    }
  }
  for (const auto& [k, v] : params)
    if (k != "endpoint" && k != "region" && k != "prefix" && k != "access_key" && k != "secret_key")
      return bad("unknown parameter `" + k + "` (endpoint, region, prefix, access_key, secret_key)");
  s.endpoint = params["endpoint"];
  if (s.endpoint.rfind("http://", 0) != 0 && s.endpoint.rfind("https://", 0) != 0)
    return bad("endpoint= must be an http:// or https:// URL");
  while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();
  if (params.count("region")) s.region = params["region"];
  s.prefix = params["prefix"];
  if (!s.prefix.empty() && s.prefix.back() != '/') s.prefix += '/';
  const char* ak = std::getenv("AWS_ACCESS_KEY_ID");
  const char* sk = std::getenv("AWS_SECRET_ACCESS_KEY");
  s.access_key = params.count("access_key") ? params["access_key"] : ak ? ak : "";
  s.secret_key = params.count("secret_key") ? params["secret_key"] : sk ? sk : "";
  if (s.access_key.empty() || s.secret_key.empty())
    return bad("no credentials: set $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY");
  return s;
}

S3Blobs::S3Blobs(S3Spec spec) : spec_(std::move(spec)) {
  global_init();
  name_ = "s3://" + spec_.bucket + " at " + spec_.endpoint;
}

std::string S3Blobs::url(const std::string& key) const {
  return spec_.endpoint + "/" + spec_.bucket + (key.empty() ? "" : "/" + spec_.prefix + key);
}

Expected<int> S3Blobs::request(const std::string& method, const std::string& key, std::string_view body,
                               bool if_none_match, std::string* response, const std::string& range) {
  CURL* h = curl_easy_init();
  if (!h) return Status::IOError(name_ + ": cannot make a curl handle");
  std::string out, target = url(key);
  Upload up{body};
  curl_slist* headers = nullptr;
  std::string payload_hash = "x-amz-content-sha256: " + sha256_hex(body);
  headers = curl_slist_append(headers, payload_hash.c_str());
  if (if_none_match) headers = curl_slist_append(headers, "If-None-Match: *");
  std::string sigv4 = "aws:amz:" + spec_.region + ":s3";
  std::string userpwd = spec_.access_key + ":" + spec_.secret_key;
  curl_easy_setopt(h, CURLOPT_URL, target.c_str());
  curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
  curl_easy_setopt(h, CURLOPT_USERPWD, userpwd.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(spec_.connect_timeout_ms));
  curl_easy_setopt(h, CURLOPT_TIMEOUT, static_cast<long>(spec_.timeout_s));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
  if (method == "PUT") {
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, feed);
    curl_easy_setopt(h, CURLOPT_READDATA, &up);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(body.size()));
  } else if (method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (method == "GET" && !range.empty()) {
    curl_easy_setopt(h, CURLOPT_RANGE, range.c_str());
  } else if (method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  CURLcode rc = curl_easy_perform(h);
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(h);
  if (rc != CURLE_OK)
    return Status::IOError("blob store " + name_ + " is unavailable: " + method + " " + (key.empty() ? "of the bucket" : key) +
                           ": " + curl_easy_strerror(rc));
  if (response) *response = std::move(out);
  return static_cast<int>(status);
}

namespace {

Status http_failure(const std::string& name, const std::string& what, int status, const std::string& body) {
  std::string m = "blob store " + name + ": " + what + ": HTTP " + std::to_string(status) + ": " + body.substr(0, 200);
  if (status >= 500) return Status::IOError(m + " (the blob store is unavailable)");
  return Status::InvalidArgument(m);
}

}  // namespace

Status S3Blobs::ensure_bucket() {
  std::string body;
  auto head = request("HEAD", "", "", false, &body);
  if (!head.ok()) return head.status();
  if (*head == 200) return Status::Ok();
  auto put = request("PUT", "", "", false, &body);
  if (!put.ok()) return put.status();
  if (*put == 200 || *put == 409) return Status::Ok();  // 409: created meanwhile (BucketAlreadyOwnedByYou)
  return http_failure(name_, "creating the bucket", *put, body);
}

Expected<bool> S3Blobs::put_if_absent(const std::string& digest, std::string_view bytes) {
  std::string body;
  auto r = request("PUT", "cas/" + digest, bytes, true, &body);
  if (!r.ok()) return r.status();
  if (*r == 200 || *r == 201) return true;
  if (*r == 412 || *r == 409) return false;  // 412: it exists; 409: a concurrent create of the same key
  return http_failure(name_, "PUT cas/" + digest.substr(0, 16), *r, body);
}

Expected<std::string> S3Blobs::get(const std::string& digest) {
  std::string body;
  auto r = request("GET", "cas/" + digest, "", false, &body);
  if (!r.ok()) return r.status();
  if (*r == 200) return body;
  if (*r == 404) return Status::NotFound("no object cas/" + digest + " in " + name_);
  return http_failure(name_, "GET cas/" + digest.substr(0, 16), *r, body);
}

Expected<std::string> S3Blobs::get_range(const std::string& digest, int64_t offset, int64_t length) {
  if (length <= 0) return std::string();
  std::string body;
  auto r = request("GET", "cas/" + digest, "", false, &body,
                   std::to_string(offset) + "-" + std::to_string(offset + length - 1));
  if (!r.ok()) return r.status();
  if (*r == 200) body = body.substr(std::min(body.size(), static_cast<size_t>(offset)), static_cast<size_t>(length));
  if ((*r == 200 || *r == 206) && body.size() == static_cast<size_t>(length)) return body;
  if (*r == 200 || *r == 206)
    return Status::IOError("blob store " + name_ + ": a ranged GET of cas/" + digest.substr(0, 16) + " answered " +
                           std::to_string(body.size()) + " bytes for " + std::to_string(length));
  if (*r == 404) return Status::NotFound("no object cas/" + digest + " in " + name_);
  return http_failure(name_, "GET cas/" + digest.substr(0, 16) + " (a range)", *r, body);
}

Status S3Blobs::quarantine(const std::string& digest, std::string_view bytes) {
  std::string body;
  if (!bytes.empty()) (void)request("PUT", "quarantine/" + digest, bytes, false, &body);  // nothing to keep when it is gone
  auto r = request("DELETE", "cas/" + digest, "", false, &body);
  if (!r.ok()) return r.status();
  if (*r == 200 || *r == 204 || *r == 404) return Status::Ok();
  return http_failure(name_, "DELETE cas/" + digest.substr(0, 16), *r, body);
}

Status S3Blobs::remove(const std::string& digest) {
  std::string body;
  auto r = request("DELETE", "cas/" + digest, "", false, &body);
  if (!r.ok()) return r.status();
  if (*r == 200 || *r == 204 || *r == 404) return Status::Ok();
  return http_failure(name_, "DELETE cas/" + digest.substr(0, 16), *r, body);
}

Status S3Blobs::overwrite_for_testing(const std::string& digest, std::string_view bytes) {
  std::string body;
  auto r = request("PUT", "cas/" + digest, bytes, false, &body);
  if (!r.ok()) return r.status();
  if (*r == 200) return Status::Ok();
  return http_failure(name_, "overwriting cas/" + digest.substr(0, 16), *r, body);
}

}  // namespace mlk::cache
