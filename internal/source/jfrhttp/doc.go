// Package jfrhttp is the jfr-http receiver: JDK Flight Recorder recordings
// pushed over HTTP by JVMs that share no disk with the bridge, as the
// Pyroscope server takes them from its Java agent:
//
//	POST /ingest?format=jfr&name=APP&from=UNIX&until=UNIX
//
// The body is a recording (one or more chunks, as `jcmd PID JFR.dump`
// writes it), raw or gzip-compressed (Content-Encoding: gzip, or a body
// that begins with gzip's magic bytes), or multipart/form-data with the
// recording (again raw or gzip) as the part named "jfr"; other parts (the
// agent's "labels") are skipped. name is the host the events belong to
// (labels in braces, Pyroscope's "app{env=prod}", are cut off); with
// security on, the host of the bearer token instead. from and until are
// checked (Unix seconds, or milliseconds or nanoseconds by their size)
// and answered back; the events keep their own times.
//
// The events become records exactly as the jfr receiver makes them
// (internal/codec/jfr, one Stream per upload, one TypeSet per receiver),
// in batches whose origin is the host, the peer's address and the
// upload's number (Session), and go through the pipeline as theirs do:
// the profile stage (implied by this receiver type too), the stream, the
// store, the Kieker log.
//
// # Chunks sent again
//
// A host's finished chunks are remembered (seenChunks: 1024 a host, 256
// hosts) once all their events went on; a chunk that comes again for the
// same host (each jcmd JFR.dump of a running recording holds the chunks
// of the dumps before) is read for its constants and its events are not
// handed on again, so a dump loop sends each event once. duplicates:
// keep turns this off.
//
// # Streaming and bounds
//
// The body is never held whole: a chunk reader takes one chunk at a time
// from the (decompressed) body, its 68-byte header first, then the chunk
// size the header gives, into a buffer reused for the next chunk; the
// chunk is decoded from that buffer and its records handed on before the
// next is read. So an upload holds one chunk (at most max_chunk_size),
// the decoder's constant pools of that chunk and the previous one, and one
// batch. max_uploads bounds the uploads being read at once (more are
// answered 429 with Retry-After), max_body_size the bytes of one upload
// before and after decompression (413).
//
// # Answers
//
// 200 with {"chunks", "events", "duplicates", "skipped", "bytes", "host",
// "from", "until"} when the recording was read to its end (duplicates:
// chunks the host sent before; skipped: malformed events left out, the
// rest of their chunk read). A client error is
// answered with {"error": reason, "chunks", "events"} naming the body
// offset and reason: 400 for what is not JFR, truncated or corrupt
// (chunks and events report what was handed on before it), bad gzip or
// multipart, a missing name or a bad from/until; 401 without a valid
// token (security); 404/405 for another path or method; 413 beyond a
// limit; 415 for another format or content encoding; 429 beyond
// max_uploads or when the pipeline does not take a batch within
// emit_timeout (back-pressure); 503 while the receiver stops.
//
// # Concurrency
//
// net/http's goroutines: one per connection and request; an upload is
// read, decoded and handed on on its request's goroutine. Run serves
// until its context ends, then lets uploads in flight finish for up to
// drain_timeout and returns once every handler has returned.
package jfrhttp
