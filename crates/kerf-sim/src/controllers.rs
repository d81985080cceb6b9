//! controllers
