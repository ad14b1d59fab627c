package confine

import (
	"io"
	"os"
	"sync/atomic"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	wsys "github.com/tetratelabs/wazero/sys"
)

// file is a wazero file over an *os.File opened beneath a root. Unlike
// wazero's own, it never opens anything again by path: appending is
// switched with fcntl and a directory is rewound with lseek.
type file struct {
	offsetSeeker[int64]
	f        *os.File
	flag     experimentalsys.Oflag
	closed   bool
	statDone bool
	dev      uint64
	ino      wsys.Inode
	isDir    bool
	guard    *Guard       // takes room for each write; nil: none
	report   func(error)  // told of a refused write; nil: none
	changed  *atomic.Bool // FS.Tracked; nil: none
}

// take takes room for n more bytes from the file's guard. A refusal is
// reported and returned as EIO, the errno wazero passes on for one it
// cannot name (the host translates it: FS.Guarded).
func (f *file) take(n int64) experimentalsys.Errno {
	err := f.guard.Reserve(n)
	if err == nil {
		return 0
	}
	if f.report != nil {
		f.report(err)
	}
	return experimentalsys.EIO
}

var _ experimentalsys.File = (*file)(nil)

func newFile(f *os.File, flag experimentalsys.Oflag) *file {
	fl := &file{f: f, flag: flag}
	fl.offsetSeeker.f = fl
	return fl
}

// offsetSeeker gives file its Seek method. The offset is a type parameter
// only so that go vet's stdmethods check, which wants io.Seeker's
// (int64, int) (int64, error), does not flag the (int64, int) (int64,
// Errno) that wazero's File interface requires.
type offsetSeeker[O ~int64] struct{ f *file }

// Seek implements experimentalsys.File.
func (s offsetSeeker[O]) Seek(offset O, whence int) (int64, experimentalsys.Errno) {
	return s.f.seek(int64(offset), whence)
}

func (f *file) cached() experimentalsys.Errno {
	if f.statDone {
		return 0
	}
	_, errno := f.Stat()
	return errno
}

// Dev implements experimentalsys.File.
func (f *file) Dev() (uint64, experimentalsys.Errno) {
	errno := f.cached()
	return f.dev, errno
}

// Ino implements experimentalsys.File.
func (f *file) Ino() (wsys.Inode, experimentalsys.Errno) {
	errno := f.cached()
	return f.ino, errno
}

// IsDir implements experimentalsys.File.
func (f *file) IsDir() (bool, experimentalsys.Errno) {
	errno := f.cached()
	return f.isDir, errno
}

// IsAppend implements experimentalsys.File.
func (f *file) IsAppend() bool { return f.flag&experimentalsys.O_APPEND != 0 }

// SetAppend implements experimentalsys.File.
func (f *file) SetAppend(enable bool) experimentalsys.Errno {
	return f.setFlag(experimentalsys.O_APPEND, enable, setAppend)
}

// IsNonblock implements experimentalsys.File.
func (f *file) IsNonblock() bool { return f.flag&experimentalsys.O_NONBLOCK != 0 }

// SetNonblock implements experimentalsys.File.
func (f *file) SetNonblock(enable bool) experimentalsys.Errno {
	return f.setFlag(experimentalsys.O_NONBLOCK, enable, setNonblock)
}

// setFlag switches flag on the open file with set, then in f.flag.
func (f *file) setFlag(flag experimentalsys.Oflag, enable bool, set func(*os.File, bool) experimentalsys.Errno) experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	if errno := set(f.f, enable); errno != 0 {
		return errno
	}
	if enable {
		f.flag |= flag
	} else {
		f.flag &^= flag
	}
	return 0
}

// Stat implements experimentalsys.File.
func (f *file) Stat() (wsys.Stat_t, experimentalsys.Errno) {
	if f.closed {
		return wsys.Stat_t{}, experimentalsys.EBADF
	}
	fi, err := f.f.Stat()
	if err != nil {
		return wsys.Stat_t{}, experimentalsys.UnwrapOSError(err)
	}
	st := wsys.NewStat_t(fi)
	f.dev, f.ino, f.isDir, f.statDone = st.Dev, st.Ino, st.Mode.IsDir(), true
	return st, 0
}

// Read implements experimentalsys.File.
func (f *file) Read(buf []byte) (int, experimentalsys.Errno) {
	if f.closed {
		return 0, experimentalsys.EBADF
	}
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.Read(buf)
	return n, fileErrno(f, err)
}

// Pread implements experimentalsys.File.
func (f *file) Pread(buf []byte, off int64) (int, experimentalsys.Errno) {
	if f.closed {
		return 0, experimentalsys.EBADF
	}
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.ReadAt(buf, off)
	return n, fileErrno(f, err)
}

// seek is Seek. On a directory only a rewind (0, io.SeekStart) is
// supported: it starts Readdir over.
func (f *file) seek(offset int64, whence int) (int64, experimentalsys.Errno) {
	if f.closed {
		return 0, experimentalsys.EBADF
	}
	if uint(whence) > io.SeekEnd {
		return 0, experimentalsys.EINVAL
	}
	if isDir, errno := f.IsDir(); errno != 0 {
		return 0, errno
	} else if isDir && (offset != 0 || whence != io.SeekStart) {
		return 0, experimentalsys.EISDIR
	}
	n, err := f.f.Seek(offset, whence)
	return n, experimentalsys.UnwrapOSError(err)
}

// Readdir implements experimentalsys.File. Names are read from the open
// directory and each entry's type and serial number are taken relative to
// its descriptor, never by path.
func (f *file) Readdir(n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	if f.closed {
		return nil, experimentalsys.EBADF
	}
	return readdir(f.f, n)
}

// Write implements experimentalsys.File.
func (f *file) Write(buf []byte) (int, experimentalsys.Errno) {
	if f.closed {
		return 0, experimentalsys.EBADF
	}
	if len(buf) == 0 {
		return 0, 0
	}
	if errno := f.take(int64(len(buf))); errno != 0 {
		return 0, errno
	}
	n, err := f.f.Write(buf)
	f.guard.Written(int64(len(buf)))
	return n, fileErrno(f, err)
}

// Pwrite implements experimentalsys.File.
func (f *file) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	if f.closed {
		return 0, experimentalsys.EBADF
	}
	if len(buf) == 0 {
		return 0, 0
	}
	if errno := f.take(int64(len(buf))); errno != 0 {
		return 0, errno
	}
	n, err := f.f.WriteAt(buf, off)
	f.guard.Written(int64(len(buf)))
	return n, fileErrno(f, err)
}

// Truncate implements experimentalsys.File.
func (f *file) Truncate(size int64) experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	if size < 0 {
		return experimentalsys.EINVAL
	}
	var grow int64
	if f.guard != nil {
		if fi, err := f.f.Stat(); err == nil && size > fi.Size() {
			grow = size - fi.Size()
			if errno := f.take(grow); errno != 0 {
				return errno
			}
		}
	}
	err := f.f.Truncate(size)
	f.guard.Written(grow)
	return fileErrno(f, err)
}

// Sync implements experimentalsys.File.
func (f *file) Sync() experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	return fileErrno(f, f.f.Sync())
}

// Datasync implements experimentalsys.File.
func (f *file) Datasync() experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	return datasync(f.f)
}

// Utimens implements experimentalsys.File.
func (f *file) Utimens(atim, mtim int64) experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	if atim == experimentalsys.UTIME_OMIT && mtim == experimentalsys.UTIME_OMIT {
		return 0
	}
	if f.changed != nil {
		f.changed.Store(true)
	}
	return futimens(f.f, atim, mtim)
}

// Close implements experimentalsys.File.
func (f *file) Close() experimentalsys.Errno {
	if f.closed {
		return 0
	}
	f.closed = true
	return experimentalsys.UnwrapOSError(f.f.Close())
}

// fileErrno maps an error of an operation on a file, not a directory, as
// wazero does: EOF is no error, and on a directory any failure is EISDIR.
func fileErrno(f *file, err error) experimentalsys.Errno {
	errno := experimentalsys.UnwrapOSError(err)
	if errno == 0 {
		return 0
	}
	if isDir, _ := f.IsDir(); isDir {
		return experimentalsys.EISDIR
	}
	return errno
}

// dirErrno maps an error of Readdir to those File.Readdir may return.
func dirErrno(err error) experimentalsys.Errno {
	switch errno := experimentalsys.UnwrapOSError(err); errno {
	case experimentalsys.EINVAL, experimentalsys.ENOTDIR:
		return experimentalsys.EBADF
	default:
		return errno
	}
}
