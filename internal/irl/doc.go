// Package irl reads Kieker's Instrumentation Record Language (IRL), the
// files in which Kieker describes its record types, and turns them into
// record types for the catalogue (tracebridge -L) and into a complete model
// (constants, defaults, annotations, aliases, templates) for generating
// record code.
//
// Parse checks the syntax of one file. Load parses files and directories
// and resolves names across them into a Model: parents, templates, imports
// (explicit, wildcard, same package, fully qualified), "grouped by" field
// references, and the field list of each entity in Kieker's order: the
// parent entity's fields, then each template's (parent templates first,
// depth first), then its own, skipping names already present. Transient
// fields are not serialized and are not fields of the record type; an
// alias adds a getter name, not a field. Model.Types and Model.AddTo (or
// LoadInto) produce record.Types named package.Name for every non-abstract
// entity and event.
//
// Errors name the file, line and column ("Flow.irl:12:3: entity X: unknown
// parent Y"). Limits on file size, file count and literal nesting are set
// in Config.
//
// Concurrency: Parse and Load may run concurrently. A Model is immutable
// after Load and safe for concurrent use; the Files and Decls it returns
// must not be modified.
package irl
