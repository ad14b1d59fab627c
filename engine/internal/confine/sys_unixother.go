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

// syncOflag converts O_DSYNC and O_RSYNC: both become the stronger
// O_SYNC.
func syncOflag(oflag experimentalsys.Oflag) int {
	if oflag&(experimentalsys.O_DSYNC|experimentalsys.O_RSYNC) != 0 {
		return unix.O_SYNC
	}
	return 0
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
