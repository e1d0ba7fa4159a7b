# params
