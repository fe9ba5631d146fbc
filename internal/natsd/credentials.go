package natsd

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tracebridge/tracebridge/stream"
)

// Credentials authenticate a client of the embedded server: every client
// connection (NATS, MQTT, in-process) must present them.
type Credentials struct {
	User, Password string
}

// credentialsUser is the user of a generated credential.
const credentialsUser = "tracebridge"

// CredentialsFile is where a bridge whose data directory is dataDir keeps
// its embedded server's credential: DATA_DIR/nats/credentials (the
// format is the stream package's, whose clients read it).
func CredentialsFile(dataDir string) string { return stream.CredentialsFile(dataDir) }

// ReadCredentials reads a credentials file: one line USER:PASSWORD.
func ReadCredentials(path string) (Credentials, error) {
	user, pass, err := stream.ReadCredentials(path)
	return Credentials{User: user, Password: pass}, err
}

// ensureCredentials reads the credentials at path, or, when there are
// none yet, creates them: user tracebridge and a random password
// (32 bytes), mode 0600, in a directory of mode 0700. Two bridges that
// start at once on one data directory end up with the same credential.
func ensureCredentials(path string) (Credentials, error) {
	c, err := ReadCredentials(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return c, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return Credentials{}, err
	}
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return Credentials{}, err
	}
	c = Credentials{User: credentialsUser, Password: base64.RawURLEncoding.EncodeToString(key[:])}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".credentials-*")
	if err != nil {
		return Credentials{}, err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return Credentials{}, err
	}
	if _, err := tmp.WriteString(c.User + ":" + c.Password + "\n"); err != nil {
		tmp.Close()
		return Credentials{}, err
	}
	if err := tmp.Close(); err != nil {
		return Credentials{}, err
	}
	// Link fails when another bridge was first: then its credential holds.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return Credentials{}, err
	}
	return ReadCredentials(path)
}
