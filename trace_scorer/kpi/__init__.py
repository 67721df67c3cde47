"""KPI formulas: combine metric values into one score."""
