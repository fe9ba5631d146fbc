// Package fressian decodes and encodes the subset of Fressian (Datomic's
// binary format, fressian-0.6.5) that zorka's agents write and zico's
// collector reads: integers in every packed form, booleans, null, floats
// and doubles, strings (packed, counted and chunked, in Java's CESU-8),
// byte arrays (also chunked), lists (counted, closed and open), maps and
// sets, tagged structs with the struct cache, the built-in tagged values
// (uuid, regex, uri, bigint, bigdec, inst, sym, key), typed arrays, the
// priority cache (put and references), RESET_CACHES and footers. The byte
// facts are in ../shared/ZICO.md §3; the package follows Java's
// FressianReader wherever that reader accepts or rejects something, and
// says so where it does not.
//
// # Decoding
//
// A Decoder is a pull parser over one payload held in memory (a ZICO frame
// carries its length, so the payload is complete before decoding starts).
// The caller asks for the value it expects — ReadInt, ReadString,
// ReadStruct, ReadList, ReadMap, ReadNull, … — or for any value (ReadValue,
// Skip, Peek). Cache references, RESET_CACHES and footers in front of a
// value are handled inside these calls, so a caller never sees them.
// Nothing is allocated except the strings, byte slices and Value trees the
// caller asks for; struct tags are interned per Decoder.
//
// Errors stick: after the first error every read returns a zero value, and
// Err reports the error with the byte offset and reason (an *Error whose
// Kind is ErrTruncated, ErrMalformed, ErrType or ErrLimit). A value that has
// the wrong type is read to its end before ErrType is reported, as Java
// reads an object before casting it, so that a truncated payload reports
// ErrTruncated wherever Java's reader would have met the end of the stream.
// No input makes a Decoder panic.
//
// Caches belong to one payload: Reset starts with empty caches (zorka
// writes every packet with a new FressianWriter, and zico reads it with a
// new FressianReader).
//
// # The priority cache
//
// zorka never writes it, but a reader must accept it. PUT_PRIORITY_CACHE
// (0xCD) reserves a slot and caches the next value; a reference (0x80–0x9F,
// or 0xCC and an index) stands for that value again. The Decoder keeps the
// byte range of each cached value: on PUT it scans the value once to find
// its end (the scan checks what Java's reader would check, so errors
// surface at the same place), and a reference replays the range, with the
// cache-filling side effects of the replayed bytes switched off. A
// reference to a slot still under construction, or RESET_CACHES or a
// footer inside a cached value, is ErrMalformed, as it is an exception in
// Java. Replays are bounded by Limits.MaxReplay so that references to
// references cannot multiply the work.
//
// # Limits
//
// Every length is checked before anything is allocated: a string or byte
// array longer than Limits.MaxString, a list, array or struct with more
// than Limits.MaxCount items, caches with more than Limits.MaxCache
// entries, values nested deeper than Limits.MaxDepth (ReadValue, Skip,
// cache references and struct tags), and more than Limits.MaxReplay bytes
// replayed through the priority cache give ErrLimit. A length within the
// limits but beyond the end of the payload is ErrTruncated; slices are
// never sized from a claimed count beyond what the remaining bytes can
// hold. A negative length is ErrMalformed (Java throws
// NegativeArraySizeException).
//
// # Deviations from Java's reader
//
//   - A struct tag that is not a string is read (and skipped) and the
//     struct reads as having the empty tag; Java keeps any object as tag.
//   - The body of a map or set may be any list form, also a cache
//     reference; a map with an odd number of items is ErrMalformed.
//   - A string whose last multi-byte sequence is cut by the end of the
//     string (or of a chunk) is ErrMalformed; Java reads past the string
//     into a stale buffer or throws.
//   - Unpaired UTF-16 surrogates become U+FFFD (a Go string holds UTF-8).
//   - The fields of the built-in tagged values (uuid, regex, …) are read as
//     untyped values.
//
// # Encoding
//
// The Append functions write exactly what Java's FressianWriter writes for
// the same values: the shortest integer form (Java's bitSwitch), 0.0 and
// 1.0 as single codes, canonical NaNs, strings as CESU-8 in pieces of at
// most 65536 bytes that never split a UTF-16 code unit, byte arrays in
// chunks of 65535 bytes, counted lists. An Encoder adds the struct cache of
// one stream (AppendStruct). The priority cache is never written, as zorka
// never writes it.
//
// # Lifetimes and concurrency
//
// ReadString and ReadValue return strings and byte slices that do not
// alias the payload; they may be kept. A Decoder keeps the payload until
// the next Reset, and must not be used after the payload is modified.
// Decoders and Encoders are not safe for concurrent use: one per
// connection.
package fressian
