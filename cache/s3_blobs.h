// Blobs in an S3-compatible bucket, through libcurl with SigV4 signing
// (CURLOPT_AWS_SIGV4; no cloud SDK). Keys are content addresses,
// "cas/<sha256>"; a blob is created only if absent (`If-None-Match: *`), so
// two replicas uploading the same bytes at once leave one object and neither
// overwrites the other. Objects are immutable: a damaged one is moved to
// "quarantine/<sha256>" and deleted, never rewritten in place.
//
// The spec (`mlk serve --blobs`): s3://BUCKET?endpoint=http://HOST:PORT
// [&region=REGION][&prefix=PATH], credentials from $AWS_ACCESS_KEY_ID and
// $AWS_SECRET_ACCESS_KEY (or access_key= and secret_key= in the query, for
// tests). Path-style URLs: ENDPOINT/BUCKET/KEY.
//
// Errors: NotFound for a missing object; IOError naming the endpoint when it
// cannot be reached, times out, or answers 5xx (the server turns that into
// 503, a miss for clients); InvalidArgument for a refusal (403 and other
// 4xx, e.g. wrong credentials or no such bucket).
// Threading: thread-safe (each call uses its own curl handle).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace mlk::cache {

struct S3Spec {
  std::string bucket, endpoint, region = "us-east-1", prefix, access_key, secret_key;
  int connect_timeout_ms = 2000;
  int timeout_s = 60;
};

// Parses an s3:// spec; InvalidArgument naming what is wrong.
Expected<S3Spec> parse_s3_spec(const std::string& spec);

class S3Blobs {
 public:
  explicit S3Blobs(S3Spec spec);
  const S3Spec& spec() const { return spec_; }
  // "s3://BUCKET at ENDPOINT", for messages.
  const std::string& name() const { return name_; }

  // Creates the bucket when it does not exist (idempotent).
  Status ensure_bucket();
  // Creates cas/<digest> with `bytes` unless it exists: true when this call
  // created it, false when it was there already.
  Expected<bool> put_if_absent(const std::string& digest, std::string_view bytes);
  // The bytes of cas/<digest> as stored (not checked: the caller re-hashes).
  Expected<std::string> get(const std::string& digest);
  // Bytes [offset, offset + length) of cas/<digest> (a ranged GET), not checked.
  Expected<std::string> get_range(const std::string& digest, int64_t offset, int64_t length);
  // Copies `bytes` (what was read, when anything was) to
  // quarantine/<digest>, best effort, and deletes cas/<digest>. A missing
  // object is not an error.
  Status quarantine(const std::string& digest, std::string_view bytes);
  // Deletes the object of `digest`; a missing one is fine.
  Status remove(const std::string& digest);

  // The raw operations on any key below the prefix.
  // `range`: a GET's byte range "FIRST-LAST", or "" for the whole object.
  Expected<int> request(const std::string& method, const std::string& key, std::string_view body,
                        bool if_none_match, std::string* response, const std::string& range = "");

  // Test seam: overwrites cas/<digest> with `bytes` (what a bad disk or a bug
  // inside the bucket would do).
  Status overwrite_for_testing(const std::string& digest, std::string_view bytes);

 private:
  std::string url(const std::string& key) const;
  S3Spec spec_;
  std::string name_;
};

}  // namespace mlk::cache
