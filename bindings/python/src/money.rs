//! Money across the boundary: `decimal.Decimal` or a decimal string in, `decimal.Decimal`
//! out, exactly (micro-units inside). A float is refused (`TypeError`), as the documents
//! refuse floats: `0.1` is not a tenth. So are `int` and `bool` (a `True` is not money).

use holon::money::Amount;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyFloat, PyString, PyType};

static DECIMAL: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn decimal_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    DECIMAL.import(py, "decimal", "Decimal")
}

/// `value` as an amount; `field` names the argument in the error.
pub(crate) fn amount(field: &str, value: &Bound<'_, PyAny>) -> PyResult<Amount> {
    let py = value.py();
    let text: String = if let Ok(s) = value.cast::<PyString>() {
        s.extract::<String>()?
    } else if value.is_instance(decimal_type(py)?)? {
        if !value.call_method0("is_finite")?.is_truthy()? {
            return Err(PyValueError::new_err(format!(
                "`{field}` must be a finite amount such as Decimal(\"0.25\"), not {}",
                value.str()?
            )));
        }
        // Fixed-point, never an exponent: Decimal("1E+2") is "100".
        value.call_method1("__format__", ("f",))?.extract()?
    } else if value.is_instance_of::<PyFloat>() {
        return Err(PyTypeError::new_err(format!(
            "`{field}` is a float ({}); money is exact: pass decimal.Decimal(\"0.25\") or the string \"0.25\"",
            value.repr()?
        )));
    } else {
        let type_name = value.get_type().name()?;
        return Err(PyTypeError::new_err(format!(
            "`{field}` must be a decimal.Decimal or a decimal string such as \"0.25\", not {type_name}"
        )));
    };
    Amount::parse(&text).map_err(|e| {
        PyValueError::new_err(format!("`{field}` must be a decimal string such as \"0.25\" (at most 6 decimals): {e}"))
    })
}

/// An optional money argument.
pub(crate) fn optional(field: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Amount>> {
    match value {
        Some(v) if !v.is_none() => amount(field, v).map(Some),
        _ => Ok(None),
    }
}

/// An amount as a `decimal.Decimal`, exactly.
pub(crate) fn decimal(py: Python<'_>, amount: Amount) -> PyResult<Py<PyAny>> {
    Ok(decimal_type(py)?.call1((amount.to_string(),))?.unbind())
}
