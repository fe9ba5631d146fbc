// Package eql is the expression language of the trace store's queries
// (`tracebridge query --eql`): zico's EQL, evaluated over tracebridge's
// trace model.
//
// Parse turns an expression such as
//
//	time > 500ms and class ~= "Dao"
//
// into an *Expr; Match evaluates it for one span of a trace, MatchTrace
// for a trace's root span (or for every span, deep). docs/QUERY.md is the
// user's reference: the grammar, what each identifier means, operators
// and their precedence, literals, null semantics.
//
// # The language in short
//
// Identifiers method, class, trace, time, calls, errors, host, clock, pct
// and signature name properties of the span (and of its trace); zico's
// "type" is an alias of trace. Any other identifier, and any name in
// backquotes (`method`, `my-key`), is an attribute of the span (its own,
// else its OpenTelemetry resource's or instrumentation scope's), null
// when absent. Attribute values of type int, double and bool are numbers and
// booleans; strings that read as decimal numbers are numbers too, but keep
// their text, so http.status_code = 500 and http.status_code = '500' both
// hold for the text "500".
//
// Comparisons involving null are false, except x = null and x != null,
// which test for absence and presence. Arithmetic on anything but numbers
// is null (except + of strings, which concatenates as in zico), bitwise
// operators take integers, and/or short-circuit, not negates the
// truthiness of its operand (null, false, 0, NaN and "" are false).
// Regular expressions (~=) are RE2, compiled once by Parse, and match
// anywhere in the value unless anchored with ^ or $, as in zico.
//
// # Limits
//
// An expression has at most MaxLen bytes, MaxDepth levels of parentheses
// and prefix operators, and regular expressions of at most MaxRegexInsts
// instructions once compiled. Input beyond them is a *SyntaxError; no
// input panics, and evaluation is linear in the expression and the
// values it looks at (RE2 guarantees linear matching).
//
// # Concurrency
//
// An *Expr is immutable after Parse: Match, MatchTrace and String may be
// called from any number of goroutines at once.
package eql
