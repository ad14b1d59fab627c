package confine

import (
	"os"
	"unsafe"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"golang.org/x/sys/unix"
)

// dirFlag opens a directory only to use it as the base of *at calls.
const dirFlag = unix.O_PATH | unix.O_DIRECTORY

// syncOflag converts O_DSYNC and O_RSYNC.
func syncOflag(oflag experimentalsys.Oflag) int {
	var flag int
	if oflag&experimentalsys.O_DSYNC != 0 {
		flag |= unix.O_DSYNC
	}
	if oflag&experimentalsys.O_RSYNC != 0 {
		flag |= unix.O_RSYNC
	}
	return flag
}

func datasync(f *os.File) experimentalsys.Errno {
	return experimentalsys.UnwrapOSError(withFd(f, unix.Fdatasync))
}

// futimens sets the times of an open file: utimensat(fd, NULL, ...), the
// system call futimens(3) makes.
func futimens(f *os.File, atim, mtim int64) experimentalsys.Errno {
	ts := [2]unix.Timespec{timespec(atim), timespec(mtim)}
	return experimentalsys.UnwrapOSError(withFd(f, func(fd int) error {
		_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
		if e != 0 {
			return e
		}
		return nil
	}))
}

func timespec(ns int64) unix.Timespec {
	if ns == experimentalsys.UTIME_OMIT {
		return unix.Timespec{Nsec: unix.UTIME_OMIT}
	}
	return unix.NsecToTimespec(ns)
}
