package textline

import (
	"math"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

func TestAppendRecord(t *testing.T) {
	typ := record.MustType("a.b.T",
		record.Field{Name: "s", Kind: record.String},
		record.Field{Name: "c", Kind: record.Char},
		record.Field{Name: "l", Kind: record.Long},
		record.Field{Name: "d", Kind: record.Double},
		record.Field{Name: "a", Kind: record.String, Array: true},
		record.Field{Name: "e", Kind: record.Int, Array: true},
	)
	var b record.Batch
	r := b.Add(typ, 7)
	r.Values[0] = record.StringValue("x \"y\"\n")
	r.Values[1] = record.IntValue('é')
	r.Values[2] = record.IntValue(math.MinInt64)
	r.Values[3] = record.DoubleValue(1.5)
	r.Values[4] = record.ListValue(record.String, []record.Value{record.StringValue("p"), record.StringValue("q")})
	got := string(AppendRecord([]byte("> "), r))
	want := `> T loggingTimestamp=7 s="x \"y\"\n" c='é' l=-9223372036854775808 d=` + record.DoubleValue(1.5).Format(record.Double) + ` a=["p" "q"] e=[]` + "\n"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}
