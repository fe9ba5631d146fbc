// Package gen writes record code for instrumented programs: record types and
// their serializers in C, Go, Python and Perl, for Kieker's built-in record
// types and for types described in IRL files (tracebridge gen).
//
// For every record type Generate writes a struct or class with the type's
// fields in serialization order, constructor defaults where the IRL gives
// them (a default naming a constant uses the constant; one naming something
// else, such as KIEKER_VERSION, is noted and left at the zero value), the
// IRL constants visible in the type (its own, its parents', its templates')
// as constants, the IRL doc comments and annotations as comments, alias
// getters, and two encoders:
//
//   - KDB binary (the bridge's own dialect): int32 id | fields, big-endian,
//     strings as int32 byte length + UTF-8 bytes, arrays as int32 count +
//     elements, no logging timestamp. The id is a parameter: the mapping
//     from ids to classes is the user's (a KDB mapping file).
//   - Kieker binary with an inline string registry (single-socket TCP):
//     int32 classNameId | int64 loggingTimestamp | fields, strings as int32
//     registry ids. A registry per connection assigns ids from 0 in order of
//     first use (the class name, then the string fields in order, array
//     elements included) and the encoder writes the entry
//     int32 -1 | int32 id | int32 byteLength | UTF-8 bytes before the frame
//     that first uses a string. The output is byte-identical to
//     kieker.Encoder{Inline: true} for the same records and registry state.
//     The logging timestamp is a parameter of the encoder, not a field.
//
// All numbers are big-endian on every host; boolean is one byte 1/0, char
// one UTF-16 unit, float and double their IEEE-754 bits. A number out of its
// field's range cannot be held by the C and Go types, raises in Python
// (struct.error) and is cut to its width by Perl's pack.
//
// # The generated APIs
//
//   - C (C99, libc only; a .h/.c pair): P_T_init(&r) sets the defaults;
//     P_T_append_kdb(&buf, id, &r) and P_T_append_kieker(&buf, &reg, ts, &r)
//     append to a P_buf (growable with realloc, or fixed over the caller's
//     memory) and return 0 or a negative P_E… code, leaving the buffer and
//     the registry unchanged on error. Strings are NUL-terminated UTF-8
//     (invalid UTF-8 is refused), arrays {items, count}. No host-endian
//     assumption: bytes are written with shifts.
//   - Go (one file, package from Options.Package): NewT() for the defaults,
//     (*T).AppendKDB(dst, id) and (*T).AppendKieker(dst, reg, ts) append to
//     the caller's slice (allocation-free once the registry knows the
//     strings); a Record interface; a Registry
//     whose zero value is ready. Invalid UTF-8 goes to KDB as it is and to
//     Kieker as U+FFFD, as internal/codec does.
//   - Python 3 (standard library, struct): classes with keyword-argument
//     constructors, append_kdb(buf, id) / append_kieker(buf, registry, ts)
//     on a bytearray, encode_… returning bytes; errors raise and leave buf
//     and the registry unchanged.
//   - Perl 5 (core modules; 64-bit integers required for pack 'q>'): one .pm
//     with a package per type, new(field => value, …), accessors,
//     encode_kdb($id) and encode_kieker($registry, $ts) returning bytes.
//     Strings are character strings (encoded as UTF-8; not Unicode text
//     dies).
//
// Names are escaped where a language reserves them (a field "class" is
// class_ in C and Python); two types whose short names clash cannot be
// generated together (ErrInvalid). The generated encoders do not enforce the
// bridge's own limits (KDB strings 64 KiB, Kieker strings 1 MiB by default),
// only what the formats can express (lengths up to 2^31-1).
//
// # Round-trip tests
//
// With Options.Tests Generate also writes a round-trip test program for the
// language and a KDB mapping file (ids 1..n in type order). The program
// builds the sample records of Samples, encodes each in both formats,
// compares the bytes with the bytes internal/codec/kdb and
// internal/codec/kieker produce for the same records (precomputed by the
// generator and embedded in the program; the generated code has no
// decoders), checks error paths, and writes the two streams to kdb.bin and
// kieker.bin in the directory given as its argument. Package gentest
// compiles and runs it and decodes those files with internal/codec.
//
// # Templates
//
// The fixed code of each language (the buffer, registry and helper code,
// the body of the test programs) is not in Go strings but in
// templates/<lang>/, embedded: files the language's own tools read and
// check (gcc, python3, perl -c, go vet templates/go/records.go), cut into
// parts by "gen:part NAME" marker comments (template.go). The generator
// writes what depends on the types around those parts; the golden files
// in testdata/golden hold whole outputs.
//
// Concurrency: the package holds no state; Generate, Find and Samples may
// run concurrently. Generate's files share no memory with its input.
package gen
