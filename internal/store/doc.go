// Package store is tracebridge's embedded trace store: every assembled
// trace, partitioned per host, in append-only compressed segments with an
// index, and the query engine over them (filters, text, regular
// expressions, EQL, a time budget, cursors), retention by age and size
// (per host: bounds asked of the host table through HostTable; host
// records and secrets are internal/hostdb's), crash recovery, check and
// rebuild.
//
// On disk (docs/STORE.md has the byte layouts):
//
//	DIR/index/              Pebble: trace ids, time indexes, block table
//	                         with bloom filters, symbols, partitions, watermarks
//	DIR/hosts/<id>/<n>.seg   a host's segments: blocks of zstd-compressed
//	                         traces, each with a CRC-32C, written by this
//	                         package only
//
// A trace spanning several hosts is stored once, in the partition of its
// root span's host, and indexed under every host it touches. Strings that
// repeat (operations, classes, attribute keys, hosts, services, threads)
// are stored once per host in a symbol dictionary; each block also
// carries the symbols it defined first, so the segments alone rebuild the
// index.
//
// Concurrency: a Store is safe for concurrent use: one writer (Append,
// Sync) and any number of readers (Get, Search).
package store
