! auto_fortran.f90 — automatic instrumentation of Fortran with gfortran's
! -finstrument-functions. Module procedures ("__shapes_MOD_fact") are shown
! as "shapes::fact" with class signature "shapes"; external procedures keep
! their symbol ("walk_").
!
!   auto_fortran
!
! Prints "call <depth> <function>" for every call it makes (note_call and
! note_return are kept out of the instrumentation with
! -finstrument-functions-exclude-function-list), then
! "auto_fortran: calls=N sent=S dropped=D".
module shapes
  implicit none
  integer :: depth_now = 0
  integer :: calls = 0
contains
  subroutine note_call(name)
    character(len=*), intent(in) :: name
    write (*, '(a,i0,1x,a)') 'call ', depth_now, name
    depth_now = depth_now + 1
    calls = calls + 1
  end subroutine note_call

  subroutine note_return()
    depth_now = depth_now - 1
  end subroutine note_return

  recursive function fact(n) result(r)
    integer, intent(in) :: n
    integer :: r
    call note_call('shapes::fact')
    if (n <= 1) then
      r = 1
    else
      r = n * fact(n - 1)
    end if
    call note_return()
  end function fact

  function area(side) result(a)
    real, intent(in) :: side
    real :: a
    call note_call('shapes::area')
    a = side * side
    call note_return()
  end function area
end module shapes

recursive subroutine walk(levels, total)
  use shapes
  implicit none
  integer, intent(in) :: levels
  integer, intent(inout) :: total
  call note_call('walk_')
  total = total + fact(levels)
  if (levels > 1) call walk(levels - 1, total)
  call note_return()
end subroutine walk

program auto_fortran
  use, intrinsic :: iso_c_binding, only: c_int64_t
  use shapes
  implicit none
  interface
    function tb_dropped() bind(C, name='tb_dropped')
      import :: c_int64_t
      integer(c_int64_t) :: tb_dropped
    end function tb_dropped
    function tb_flush(timeout_ms) bind(C, name='tb_flush')
      use, intrinsic :: iso_c_binding, only: c_int
      integer(c_int), value :: timeout_ms
      integer(c_int) :: tb_flush
    end function tb_flush
  end interface
  integer :: total, rc
  real :: a
  ! gfortran's generated C entry point and the main program are
  ! instrumented too.
  call note_call('main')
  call note_call('MAIN__')
  total = 0
  call walk(3, total)
  a = area(2.0)
  call note_return()
  call note_return()
  rc = tb_flush(5000)
  write (*, '(a,i0,a,i0,a,f0.1,a,i0)') 'auto_fortran: calls=', calls, ' total=', total, ' area=', a, &
    ' dropped=', tb_dropped()
end program auto_fortran
