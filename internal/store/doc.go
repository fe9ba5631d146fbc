// Package store is tracebridge's embedded trace store: every assembled
// trace, partitioned per host, in self-contained immutable blocks
// (internal/store/block) on a local directory or in an S3-compatible
// bucket (internal/objstore), with a local write-ahead area for the
// newest traces; and the query engine over them (filters, text, regular
// expressions, EQL, a time budget, cursors), retention and compaction of
// whole blocks, crash recovery, check, rebuild, and the conversion of a
// store of version 1.
//
// docs/STORE.md describes the bytes:
//
//	DIR/wal/<host>/<id>.wal          a host's head: chunks of zstd-compressed
//	                                 traces with the symbols they define, CRC-32C
//	blocks/<host>/<id>/data          a block: pages, dictionary, index of trace
//	blocks/<host>/<id>/meta.json     summaries, filters, term index; and its meta
//
// A trace spanning several hosts is stored once, in the partition of its
// root span's host, and found by a search for any host it touches. A
// trace stored in parts (different blocks) is merged on read and by
// compaction.
//
// Several stores (the nodes of a cluster, each with its own DIR) may write
// into one bucket (Options.Node): each announces its blocks under recent/
// and takes in the others' (listing.go), a block gone under a read is
// skipped and the read made again, a trace's spans are one per span id
// wherever its parts meet (trace.MergeParts), and one store at a time
// deletes and compacts (Options.MayCompact).
//
// Concurrency: a Store is safe for concurrent use: one writer (Append,
// Sync, Retain, Compact) and any number of readers (Get, Search), also in
// other processes (Options.ReadOnly); and other writers of its bucket
// (Options.Node).
package store
