// Package kieker encodes and decodes Kieker's own record encodings: the
// binary record frames of Kieker's .bin files and TCP writers (with their
// string registries), the ASCII lines of .dat files, and the kieker.map
// string table. It works on byte slices and io.Reader/io.Writer only; file
// naming, compression and directory discovery belong to the log-directory
// layer.
//
// # Binary frames
//
// A frame is int32 classNameId | int64 loggingTimestamp | fields, big-endian,
// with strings as int32 ids into a string registry. A Decoder decodes frames
// in one of three modes:
//
//   - file mode (the default): every id resolves through a Strings table the
//     caller fills from kieker.map (ReadMap);
//   - inline mode (Options.Inline): Kieker's SingleSocketTcpWriter and the
//     Python and C language packs interleave registry entries
//     int32 -1 | int32 id | int32 length | bytes with the frames;
//   - dual-socket mode (Options.DualSocket): Kieker ≤1.12's TCPWriter and the
//     DualSocketTcpWriter send registry entries int32 id | int32 length |
//     bytes on a second connection, decoded by a RegistryDecoder into the
//     same Strings table. A frame that uses a string the registry connection
//     has not delivered yet gives ErrUnknownString without being consumed,
//     and the caller retries the same bytes later.
//
// An Encoder writes frames, assigning string ids from a Registry in order of
// first use (class name first, then the string fields in order, as Kieker
// 2.0 does). In inline mode it writes the registry entries before the frame
// that first uses them, with the byte length of the UTF-8 text (Kieker's Java
// writer puts the UTF-16 char count there, which corrupts non-ASCII strings;
// the decoder detects that and Options.JavaCharCount recovers such streams).
//
// A Decoder with Options.KeepFrames also keeps each frame's bytes beside
// its record (record.Frames), and a Recoder writes such records into a
// binary log by copying the frames with the class and string ids replaced
// by the log's (Kieker's log and TCP streams share the frame layout): one
// table lookup per string field instead of encoding every value again.
// With Options.FramesOnly it keeps the records of the types no consumer
// reads as frames alone (record.Frames.Only: a type per frame and a view
// of the string registry; the string ids checked, the values never
// decoded), which Recoder.AppendOnly copies the same way.
//
// # ASCII lines
//
// A .dat line is $typeId;loggingTimestamp;field;field…; LineDecoder decodes
// one line, TextDecoder splits a byte stream into lines, AppendLine writes
// one. Text follows Kieker 2.0's reader exactly: values are split at ';', a
// backslash keeps itself and the next character verbatim, so read values are
// the values Kieker reads. Doubles and floats are written as Java's
// Double.toString and Float.toString print them (package javanum).
//
// # Lifetimes
//
// Decoders never keep the caller's buffer: every string they put in a record
// is an immutable Go string (registered once per registry entry, or interned
// per decoder for ASCII values), so records may be kept as long as the batch
// rules of package record allow. Encoders append to the caller's slice and
// keep nothing of it.
//
// # Concurrency
//
// Decoders, encoders, Strings and Registry are not safe for concurrent use:
// give each file or connection its own. In dual-socket mode the Decoder and
// the RegistryDecoder share one Strings table, so the caller must not run
// them at the same time (one goroutine, or one mutex around both).
package kieker
