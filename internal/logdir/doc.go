// Package logdir owns the on-disk layout of Kieker log directories: which
// files make up a log, their names and order, and their compression. It
// moves bytes only; decoding records and kieker.map lines is
// internal/codec/kieker's job.
//
// Reading. Discover finds logs (directories holding kieker.map or
// tpmon.map, and Kieker ≤1.12's per-thread zips holding data files and
// their map). A Log lists its DataFiles in Kieker's order (CompareNames)
// and opens its map. DataFile.Open returns a Stream of decompressed bytes
// whose Format (compression and ASCII/binary) is decided by content: the
// compression by magic bytes (Sniff), never by name, since Kieker's own
// names do not say it (bzip2 data under ".gz"). Everything streams: no
// file is read whole, memory per Stream is two buffers plus the
// decompressor (bounded by Limits). Zip files are read from their local
// headers, so a zip cut off by a crash yields what it holds; every
// compressed stream cut short returns all bytes it could decode and then
// an *Error wrapping ErrTruncated. For xz that is every complete LZMA2
// chunk: the chunk a crash interrupted is lost (tracebridge's own writer
// ends a stream or at least a chunk on every Flush, so nothing flushed is
// lost; a Kieker-written xz file cut short can lose up to one chunk).
// Whether a cut is a killed writer's expected end (the last data file of a
// log) or malformed data (any other) is the caller's decision
// (internal/source/kiekerlog). Log.Consumed counts the compressed bytes
// read, for progress bars.
//
// Writing. DirName and DataFileName build Kieker ≥1.13/1.14 names;
// ParseCompression reads tracebridge's and Kieker's compression names;
// Files writes a log directory's data files with Kieker's rotation
// (maxEntriesInFile) and retention (maxLogFiles, maxLogSize) and flushes
// them so that a killed process leaves decodable files: gzip and xz end
// their stream on Flush (gzip members, xz streams), deflate and zip, which
// Kieker reads as one stream per file, sync-flush theirs (see Files). The
// caller writes kieker.map.
//
// Concurrency: a Log may be shared; each Stream and each Files belongs to
// one goroutine (Files writes a full buffer, and a rotated file's last
// bytes and its close, on a goroutine of its own, one write at a time,
// so that encoding and write system calls overlap; the next file after
// a rotation is created on a goroutine too, and its first write waits
// for it; Flush and Close wait for them, and an error comes back from
// the next Write, Flush or Close); Log.Consumed may be read from any
// goroutine.
package logdir
