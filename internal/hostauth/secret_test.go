package hostauth

import "testing"

func TestSecrets(t *testing.T) {
	h := HashSecret("s3cr3t")
	if !CheckSecret(h, "s3cr3t") || CheckSecret(h, "s3cr3T") || CheckSecret("plain", "plain") {
		t.Fatal("secret check")
	}
	if h == HashSecret("s3cr3t") {
		t.Fatal("no salt")
	}
}
