package homefiles

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/lhengine/lhengine/api"
)

// Listen listens on the home's API socket (api.SocketPath), in a directory
// only this user may enter, replacing a socket left by an owner that died:
// the caller must already own the home (have its store open), so no live
// process can be serving on it. The socket file is removed when the
// listener is closed.
func Listen(home string) (net.Listener, error) {
	path := api.SocketPath(home)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	// MkdirAll keeps the mode of a directory that exists: make sure.
	if err := os.Chmod(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove the stale API socket: %w", err)
	}
	if len(path) >= maxSocketPath {
		return nil, fmt.Errorf("the API socket path %s is %d bytes long; Unix sockets take at most %d: use a home with a shorter path", path, len(path), maxSocketPath-1)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// maxSocketPath is the size of sun_path (Linux 108, BSDs and macOS 104).
const maxSocketPath = 104
