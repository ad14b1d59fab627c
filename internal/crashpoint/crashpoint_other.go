//go:build !unix

package crashpoint

import "os"

// die ends the process at once where there is no SIGKILL. On Windows,
// killing the process itself is TerminateProcess: no deferred function, no
// flush, no DLL or runtime shutdown, which is what SIGKILL does on Unix. If
// that is refused (or the platform has no processes to kill), the process
// exits with status 137, the status a shell reports for SIGKILL, through
// os.Exit, which runs no deferred function either.
func die() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
	os.Exit(137)
}
