// smla._smla: the extension module behind the `smla` package. smla::Error becomes
// smla.SmlaError (a ValueError carrying the core's message and its three parts),
// smla::RuntimeError becomes RuntimeError.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "smla/error.h"

namespace nb = nanobind;

namespace smla::py {
void bind_ops(nb::module_& m);
void bind_metadata(nb::module_& m);
void bind_capabilities(nb::module_& m);
}  // namespace smla::py

namespace {

PyObject* g_smla_error = nullptr;

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const smla::Error& e) {
    nb::object cls = nb::borrow(g_smla_error);
    nb::object exc = cls(e.what());
    exc.attr("argument") = e.argument();
    exc.attr("expected") = e.expected();
    exc.attr("given") = e.given();
    PyErr_SetObject(g_smla_error, exc.ptr());
  } catch (const smla::RuntimeError& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

}  // namespace

NB_MODULE(_smla, m) {
  m.doc() = "smla: MLA attention kernels (binding; use the smla package)";

  g_smla_error = PyErr_NewExceptionWithDoc(
      "smla.SmlaError",
      "Bad input rejected by smla before anything ran: '<argument> must be <expected>, got <given>'. "
      "Attributes argument, expected and given hold the three parts.",
      PyExc_ValueError, nullptr);
  m.attr("SmlaError") = nb::handle(g_smla_error);
  nb::register_exception_translator(translate);

  smla::py::bind_ops(m);
  smla::py::bind_metadata(m);
  smla::py::bind_capabilities(m);
}
