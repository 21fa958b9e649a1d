//! Copying a clone's referenced files into its own location (detach, deep clone). (Being
//! built.)
