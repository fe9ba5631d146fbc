package stream

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// DefaultDataDir is the data directory of `tracebridge serve` unless
// --data-dir or data_dir says otherwise.
const DefaultDataDir = "./tracebridge-data"

// CredentialsFile is where the bridge whose data directory is dataDir
// keeps the credential of its embedded NATS server: DATA_DIR/nats/credentials,
// one line USER:PASSWORD, mode 0600, created on the bridge's first start.
func CredentialsFile(dataDir string) string {
	return filepath.Join(dataDir, "nats", "credentials")
}

// ReadCredentials reads a credentials file: its first line, USER:PASSWORD.
func ReadCredentials(path string) (user, password string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	user, password, ok := strings.Cut(strings.TrimSpace(line), ":")
	if !ok || user == "" || password == "" {
		return "", "", fmt.Errorf("credentials %s: want one line USER:PASSWORD", path)
	}
	return user, password, nil
}

// credentials picks what Open authenticates with: the options' user,
// else the URL's, else the CredsFile's (which must be readable), else,
// for a server on loopback, the credential of the bridge whose data
// directory is o.DataDir when it has one. A server elsewhere never gets
// the local bridge's credential unasked.
func (o Options) credentials(host, urlUser, urlPass string) (user, pass string, err error) {
	switch {
	case o.User != "":
		return o.User, o.Password, nil
	case urlUser != "":
		return urlUser, urlPass, nil
	case o.CredsFile != "":
		return ReadCredentials(o.CredsFile)
	case o.DataDir != "" && loopbackHost(host):
		user, pass, err := ReadCredentials(CredentialsFile(o.DataDir))
		if errors.Is(err, fs.ErrNotExist) {
			return "", "", nil // no bridge there: try without
		}
		return user, pass, err
	}
	return "", "", nil
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// hostOf returns the host of a URL SCHEME://HOST:PORT (the first of a
// comma-separated list).
func hostOf(target string) string {
	first, _, _ := strings.Cut(target, ",")
	_, hostPort, _ := strings.Cut(first, "://")
	h, _, _ := net.SplitHostPort(hostPort)
	return h
}
