package analysis

import (
	"slices"
	"strings"
)

// Signature is an operation signature split as Kieker's
// ClassOperationSignaturePair.splitOperationSignatureStr splits it:
// "public static Boolean a.b.C.op(Integer, Long)" has the modifiers
// [public static], the return type Boolean, the class a.b.C, the name op
// and the parameter types [Integer Long]. Modifiers, return type and
// parameter list are optional ("a.b.C.op" is class a.b.C, name op, no
// parameters), but a return type must precede the name when modifiers do.
type Signature struct {
	Modifiers  []string
	ReturnType string // "" when there is none
	Class      string // the fully qualified class, "" when the name has no '.'
	Name       string
	Params     []string
}

// ParseSignature splits s by Kieker's rules for an
// OperationExecutionRecord's signature (ExecutionRecordTransformationStage):
// a signature that contains "<init>" is a constructor's.
func ParseSignature(s string) Signature {
	return ParseSignatureAs(s, strings.Contains(s, "<init>"))
}

// ParseSignatureAs splits s by Kieker's rules; a constructor's signature
// (constructor set: Kieker's event traces decide by the event's type) has
// no return type: every word before the name is a modifier.
func ParseSignatureAs(s string, constructor bool) Signature {
	var sig Signature
	modRetName := s
	if open := strings.IndexByte(s, '('); open >= 0 {
		modRetName = s[:open]
		// Kieker takes what lies between '(' and the last character,
		// whatever that is, and splits it at commas, skipping empty pieces.
		inner := ""
		if open+1 < len(s)-1 {
			inner = s[open+1 : len(s)-1]
		}
		for p := range strings.SplitSeq(inner, ",") {
			if p != "" {
				sig.Params = append(sig.Params, javaTrim(p))
			}
		}
	}
	name := modRetName
	if strings.LastIndexByte(modRetName, ' ') >= 0 {
		words := splitJavaSpace(modRetName)
		if len(words) > 0 {
			name = words[len(words)-1]
			rest := words[:len(words)-1]
			switch {
			case constructor:
				sig.Modifiers = rest
			case len(rest) > 0:
				sig.ReturnType = rest[len(rest)-1]
				sig.Modifiers = rest[:len(rest)-1]
			}
		}
	}
	if dot := strings.LastIndexByte(name, '.'); dot >= 0 {
		sig.Class, sig.Name = name[:dot], name[dot+1:]
	} else {
		sig.Name = name
	}
	if len(sig.Modifiers) == 0 {
		sig.Modifiers = nil
	}
	return sig
}

// String returns the signature as Kieker writes it back
// (ClassOperationSignaturePair.createOperationSignatureString): modifiers
// and return type only when there is a return type, then
// class.name(params) with ", " between the parameters.
func (s Signature) String() string {
	var b strings.Builder
	if s.ReturnType != "" {
		for _, m := range s.Modifiers {
			b.WriteString(m)
			b.WriteByte(' ')
		}
		b.WriteString(s.ReturnType)
		b.WriteByte(' ')
	}
	b.WriteString(s.Class)
	b.WriteByte('.')
	b.WriteString(s.Name)
	b.WriteByte('(')
	b.WriteString(strings.Join(s.Params, ", "))
	b.WriteByte(')')
	return b.String()
}

// Equal reports whether s and o are the same signature apart from the
// class (Kieker's Signature.equals: name, modifiers, return type and
// parameter types).
func (s *Signature) Equal(o *Signature) bool {
	return s.Name == o.Name && s.ReturnType == o.ReturnType &&
		slices.Equal(s.Modifiers, o.Modifiers) && slices.Equal(s.Params, o.Params)
}

// Short returns the operation as Kieker labels it in graphs: the name and
// "(..)" when there are parameters, "()" otherwise.
func (s Signature) Short() string {
	if len(s.Params) > 0 {
		return s.Name + "(..)"
	}
	return s.Name + "()"
}

// javaTrim trims what Java's String.trim trims: every char up to ' '.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// splitJavaSpace splits like Java's s.split("\\s"): at every single
// whitespace character, keeping empty words between two of them, dropping
// the empty words at the end.
func splitJavaSpace(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\v', '\f', '\r':
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	out = append(out, s[start:])
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}
