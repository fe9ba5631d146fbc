package gen

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

// BenchmarkGenerate generates the code for the 67 built-in types; bytes
// are those of the generated files.
func BenchmarkGenerate(b *testing.B) {
	var types []Type
	for _, t := range record.Builtin().Types() {
		types = append(types, Type{Record: t})
	}
	for _, lang := range Langs() {
		for _, tests := range []bool{false, true} {
			name := lang.String()
			if tests {
				name += "+tests"
			}
			b.Run(name, func(b *testing.B) {
				o := Options{Lang: lang, Tests: tests}
				files, err := Generate(types, o)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for _, f := range files {
					n += len(f.Data)
				}
				b.SetBytes(int64(n))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := Generate(types, o); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
