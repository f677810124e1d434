#!/usr/bin/env python3
"""Estimate the ITP (Impuesto sobre Transmisiones Patrimoniales) of a property sale.

Contract (s3skills script runner): ONE JSON object arrives on stdin (the runner's
default, invisible to other users) or, when given, as argv[1] (`args_via="argv"`),

    echo '{"precio": 250000, "comunidad": "madrid", "valor_referencia": 240000}' | python3 calcular_itp.py

and stdout receives exactly one JSON value: the estimate, exit code 0. Invalid input
prints a JSON object with an "error" key and exits with 2. Standard library only.

The rates below are ILLUSTRATIVE: simplified general rates per autonomous community,
applied as a marginal scale. They are not legal or tax advice, are not updated with each
year's regional laws and ignore every reduced rate (young buyers, large families,
disability, social housing).
"""

from __future__ import annotations

import json
import math
import sys
import unicodedata
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

# Each community: (display name, [(lower bound of the bracket in euros, rate in %), ...]).
# Illustrative figures, see the module docstring.
TIPOS: dict[str, tuple[str, list[tuple[int, str]]]] = {
    "andalucia": ("Andalucía", [(0, "7")]),
    "aragon": ("Aragón", [(0, "8"), (400_000, "8.5"), (450_000, "9"), (500_000, "9.5"), (750_000, "10")]),
    "asturias": ("Principado de Asturias", [(0, "8"), (300_000, "9"), (500_000, "10")]),
    "baleares": ("Illes Balears", [(0, "8"), (400_000, "9"), (600_000, "10"), (1_000_000, "12"), (2_000_000, "13")]),
    "canarias": ("Canarias", [(0, "6.5")]),
    "cantabria": ("Cantabria", [(0, "9")]),
    "castilla-la-mancha": ("Castilla-La Mancha", [(0, "9")]),
    "castilla-y-leon": ("Castilla y León", [(0, "8"), (250_000, "10")]),
    "cataluna": ("Cataluña", [(0, "10"), (1_000_000, "11")]),
    "comunidad-valenciana": ("Comunitat Valenciana", [(0, "10")]),
    "extremadura": ("Extremadura", [(0, "8"), (360_000, "10"), (600_000, "11")]),
    "galicia": ("Galicia", [(0, "8")]),
    "la-rioja": ("La Rioja", [(0, "7")]),
    "madrid": ("Comunidad de Madrid", [(0, "6")]),
    "murcia": ("Región de Murcia", [(0, "7.75")]),
    "navarra": ("Navarra", [(0, "6")]),
    "pais-vasco": ("País Vasco", [(0, "4")]),
}

ALIAS = {
    "catalunya": "cataluna",
    "comunidad-de-madrid": "madrid",
    "comunitat-valenciana": "comunidad-valenciana",
    "valencia": "comunidad-valenciana",
    "euskadi": "pais-vasco",
    "illes-balears": "baleares",
    "islas-baleares": "baleares",
    "principado-de-asturias": "asturias",
    "region-de-murcia": "murcia",
    "rioja": "la-rioja",
    "comunidad-foral-de-navarra": "navarra",
}

CAMPOS = ("precio", "comunidad", "valor_referencia")
MAXIMO = Decimal(100_000_000_000)
CENTIMO = Decimal("0.01")
EJEMPLO = {"precio": 250000, "comunidad": "madrid"}
AVISO = (
    "Estimación con tipos generales ilustrativos y simplificados; no aplica tipos reducidos "
    "ni bonificaciones. Compruebe la normativa autonómica vigente."
)


class EntradaInvalida(ValueError):
    """The input breaks the contract; the message is shown to the agent."""


def normaliza(nombre: str) -> str:
    """'Cataluña' -> 'cataluna', 'Castilla y León' -> 'castilla-y-leon'."""
    sin_tildes = unicodedata.normalize("NFKD", nombre).encode("ascii", "ignore").decode("ascii")
    clave = "-".join(sin_tildes.lower().replace("_", " ").split())
    return ALIAS.get(clave, clave)


def importe(datos: dict[str, Any], campo: str) -> Decimal:
    """A positive, finite amount of euros."""
    valor = datos[campo]
    if isinstance(valor, bool) or not isinstance(valor, int | float):
        raise EntradaInvalida(f"'{campo}' debe ser un número (euros), no {json.dumps(valor, ensure_ascii=False)}")
    if isinstance(valor, float) and not math.isfinite(valor):
        raise EntradaInvalida(f"'{campo}' debe ser un número finito")
    cantidad = Decimal(str(valor))
    if cantidad < 0 or (campo == "precio" and cantidad == 0):
        raise EntradaInvalida(f"'{campo}' debe ser mayor que cero")
    if cantidad > MAXIMO:
        raise EntradaInvalida(f"'{campo}' es demasiado grande")
    return cantidad


def euros(cantidad: Decimal) -> float:
    """Rounded to cents, as a JSON number."""
    return float(cantidad.quantize(CENTIMO, rounding=ROUND_HALF_UP))


def calcula(datos: object) -> dict[str, Any]:
    """The estimate for one input object.

    Raises:
        EntradaInvalida: The input is not a valid request.
    """
    if not isinstance(datos, dict):
        raise EntradaInvalida(f"la entrada debe ser un objeto JSON, p. ej. {json.dumps(EJEMPLO)}")
    sobrantes = sorted(set(datos) - set(CAMPOS))
    if sobrantes:
        raise EntradaInvalida(f"campos desconocidos: {', '.join(sobrantes)}; se admiten: {', '.join(CAMPOS)}")
    for campo in ("precio", "comunidad"):
        if campo not in datos:
            raise EntradaInvalida(f"falta el campo obligatorio '{campo}'")
    if not isinstance(datos["comunidad"], str) or not datos["comunidad"].strip():
        raise EntradaInvalida("'comunidad' debe ser el nombre de una comunidad autónoma")
    comunidad = normaliza(datos["comunidad"])
    if comunidad not in TIPOS:
        raise EntradaInvalida(f"comunidad desconocida: {datos['comunidad']!r}")
    precio = importe(datos, "precio")
    referencia = importe(datos, "valor_referencia") if datos.get("valor_referencia") is not None else None
    base = max(precio, referencia) if referencia is not None else precio

    nombre, escala = TIPOS[comunidad]
    tramos = []
    cuota = Decimal(0)
    for i, (desde, tipo) in enumerate(escala):
        hasta = escala[i + 1][0] if i + 1 < len(escala) else None
        if base <= desde:
            break
        parte = (min(base, Decimal(hasta)) if hasta is not None else base) - desde
        cuota_tramo = parte * Decimal(tipo) / 100
        cuota += cuota_tramo
        tramos.append(
            {"desde": desde, "hasta": hasta, "tipo": float(tipo), "base": euros(parte), "cuota": euros(cuota_tramo)}
        )
    return {
        "comunidad": comunidad,
        "nombre": nombre,
        "precio": euros(precio),
        "valor_referencia": euros(referencia) if referencia is not None else None,
        "base_imponible": euros(base),
        "cuota": euros(cuota),
        "tipo_medio": float((cuota * 100 / base).quantize(CENTIMO, rounding=ROUND_HALF_UP)),
        "tramos": tramos,
        "aviso": AVISO,
    }


def entrada(argv: list[str]) -> str:
    """The JSON text: argv[1] when given, else all of stdin (never a terminal)."""
    if len(argv) > 2:
        raise EntradaInvalida("se espera como mucho un argumento: un objeto JSON")
    if len(argv) == 2:
        return argv[1]
    if sys.stdin is None or sys.stdin.isatty():
        raise EntradaInvalida("se espera un objeto JSON en la entrada estándar (stdin) o como argumento")
    texto = sys.stdin.read()
    if not texto.strip():
        raise EntradaInvalida("la entrada está vacía: se espera un objeto JSON en stdin o como argumento")
    return texto


def main(argv: list[str]) -> int:
    """Run the contract: one JSON object in (stdin or argv[1]), one JSON value out."""
    try:
        texto = entrada(argv)
        try:
            datos = json.loads(texto)
        except json.JSONDecodeError as exc:
            raise EntradaInvalida(f"la entrada no es JSON válido ({exc.msg}, columna {exc.colno})") from None
        resultado = calcula(datos)
    except EntradaInvalida as exc:
        error = {"error": str(exc), "comunidades_validas": sorted(TIPOS), "ejemplo": EJEMPLO}
        print(json.dumps(error, ensure_ascii=False))
        return 2
    print(json.dumps(resultado, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
