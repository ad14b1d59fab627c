//go:build unix && !linux

package confine

import (
	"os"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"golang.org/x/sys/unix"
)

// dirFlag opens a directory to use it as the base of *at calls (no
// O_PATH here: the directory must be readable).
const dirFlag = unix.O_RDONLY | unix.O_DIRECTORY

// sysOflag converts the open flags os has no name for; O_DSYNC and
// O_RSYNC become the stronger O_SYNC.
func sysOflag(oflag experimentalsys.Oflag) int {
	var flag int
	if oflag&experimentalsys.O_DIRECTORY != 0 {
		flag |= unix.O_DIRECTORY
	}
	if oflag&(experimentalsys.O_DSYNC|experimentalsys.O_RSYNC) != 0 {
		flag |= unix.O_SYNC
	}
	if oflag&experimentalsys.O_NOFOLLOW != 0 {
		flag |= unix.O_NOFOLLOW
	}
	if oflag&experimentalsys.O_NONBLOCK != 0 {
		flag |= unix.O_NONBLOCK
	}
	return flag
}

func datasync(f *os.File) experimentalsys.Errno {
	return experimentalsys.UnwrapOSError(f.Sync())
}

// futimens sets the times of an open file with futimes (microseconds); an
// omitted time is read back first.
func futimens(f *os.File, atim, mtim int64) experimentalsys.Errno {
	return experimentalsys.UnwrapOSError(withFd(f, func(fd int) error {
		if atim == experimentalsys.UTIME_OMIT || mtim == experimentalsys.UTIME_OMIT {
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				return err
			}
			if atim == experimentalsys.UTIME_OMIT {
				atim = unix.TimespecToNsec(st.Atim)
			}
			if mtim == experimentalsys.UTIME_OMIT {
				mtim = unix.TimespecToNsec(st.Mtim)
			}
		}
		return unix.Futimes(fd, []unix.Timeval{unix.NsecToTimeval(atim), unix.NsecToTimeval(mtim)})
	}))
}
