package trace

import (
	"os"
	"testing"
)

// TestMain checks, in every test of the package (the fuzz targets' seeds
// included), that where the assembler leaves a trace's calls in the order
// they came (inTreeOrder), tree would have given the same.
func TestMain(m *testing.M) {
	checkTreeOrder = true
	os.Exit(m.Run())
}
