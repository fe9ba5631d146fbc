// Package kdb speaks the Kieker Data Bridge (KDB) formats: the mapping file
// that gives record classes their numeric ids, and the two wire dialects
// third-party probes send to a bridge.
//
// # Mapping file
//
// Lines "<id>=<fully.qualified.RecordClass>"; blank lines and lines starting
// with '#' are skipped, spaces around id and name are trimmed, CRLF line ends
// are tolerated. Class names resolve through a record.Catalog, legacy names
// included. ParseMapping reads one (internal/mapping loads files), DefaultMapping builds the
// bridge's default table, (*Mapping).WriteTo writes one.
//
// # Binary dialect (TCP streams, broker byte messages)
//
// A stream is any number of records back to back, each
//
//	int32 id | fields
//
// big-endian, fields in the type's order, no logging timestamp and no string
// registry. boolean 1 byte (non-zero is true; encoders write 1 or 0), byte 1,
// short 2, int 4, long 8, float 4 and double 8 (IEEE-754 bits), char 2 (one
// UTF-16 unit). A string is an int32 byte length followed by that many UTF-8
// bytes; an array is an int32 element count followed by the elements.
// Decoded records carry record.NoTimestamp.
//
// Decoder is resumable: Decode decodes every complete record of the buffer
// it is given, reports how many bytes it consumed and leaves an incomplete
// trailing record for the next call, to which the caller passes the
// unconsumed bytes followed by new ones. The records are the same whether
// the stream arrives whole or one byte at a time. Errors are final: a binary
// stream has no markers to resynchronise on.
//
// # Text dialect (broker text messages)
//
//	<id>;<v1>;<v2>;…
//
// Values in the type's order, arrays as their count followed by one value per
// element. A backslash makes the next character literal ("\;" is a ';' in a
// value, "\\" a backslash, "\" before a newline keeps the newline inside the
// value). Booleans are true/false in any case, or KDB 1.8–1.12's t/f;
// numbers are read like Java's parse methods. A message may hold several
// records, one per line ("\n" or "\r\n"); blank lines are skipped.
//
// # Limits
//
// Options carries every limit with a safe default: MaxStringLen (64 KiB, the
// cap of the original KDB), MaxArrayLen and, for the binary dialect,
// MaxRecordSize. Input over a limit is an error naming the limit; encoders
// refuse to write what the decoders would refuse to read.
//
// # Memory and concurrency
//
// Decoded records hold no reference to the caller's buffer: strings are
// copied once and interned per decoder (record.Interner), so repeated
// operation signatures cost no allocation; array fields allocate their
// elements. The buffer may be reused as soon as a call returns. Records land
// in the caller's record.Batch and follow its ownership rules.
//
// A Mapping is immutable and safe for concurrent use. A Decoder or
// TextDecoder belongs to one connection or consumer goroutine and is not safe
// for concurrent use. An Encoder is immutable and safe for concurrent use;
// the Append functions write only to the slice they are given.
package kdb
